import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createImportHandler, importPayload } from "../src/index.js";
import { rejection, withTempDir } from "./support/harness.js";
import { SQL_BACKENDS, sqlUpsertImporter, type SqlJobBackend } from "./support/sql-job.js";

// Each backend words a unique-key violation its own way; the report passes it on as is.
const REFUSAL: Record<SqlJobBackend["name"], RegExp> = {
  postgres: /^the database refused this row: duplicate key value violates unique constraint/,
  sqlite: /^the database refused this row: UNIQUE constraint failed: people\.email$/,
  mysql: /^the database refused this row: Duplicate entry 'p3@x\.org' for key/,
};

function csv(rows: Array<[number, string, string]>): string {
  return `id,name,email,note\n${rows.map(([id, name, email]) => `${id},${name},${email},n`).join("\n")}\n`;
}

describe.each(SQL_BACKENDS)("dry run on $name", (backend) => {
  const { name } = backend;
  let db: SqlJobBackend;
  beforeEach(async () => {
    db = await backend.create();
  });
  afterEach(async () => {
    await db.close();
  });

  it("writes nothing, names the rows the database refuses, and says what an import would do", async () => {
    await withTempDir(async (dir) => {
      await db.query("INSERT INTO people (id, name, email, note) VALUES (100, 'Taken', 'p3@x.org', 'n'), (2, 'P2', 'p2@x.org', 'n')");
      await writeFile(
        path.join(dir, "a.csv"),
        csv([
          [1, "P1", "p1@x.org"],
          [2, "P2", "p2@x.org"],
          [3, "P3", "p3@x.org"],
          [4, "P4", "bad"],
        ]),
      );
      const handler = createImportHandler({ importers: { people: sqlUpsertImporter() }, baseDir: dir, batchSize: 10 });
      const report = await handler(importPayload({ importer: "people", file: "a.csv", dryRun: true }), db.context(null));
      expect(report).toMatchObject({ dryRun: true, read: 4, imported: 2, rejected: 2, created: 1, unchanged: 1 });
      expect(report.errors).toEqual([
        { line: 5, field: "email", message: "must be an email address" },
        { line: 4, field: "", message: expect.stringMatching(REFUSAL[name]) as string },
      ]);
      const rows = await db.query("SELECT id FROM people ORDER BY id");
      expect(rows.map((r) => Number(r.id))).toEqual([2, 100]);
      expect(await db.readProgress()).toMatchObject({ dryRun: true, read: 4 });

      // The import the dry run warned about: the refused row fails its batch, and the batch rolls back whole.
      const error = await rejection(handler(importPayload({ importer: "people", file: "a.csv" }), db.context(null)));
      expect(error.message).toMatch(/^writing the batch that ends on line 5 failed: /);
      expect(error.retryable).toBe(true);
      const after = await db.query("SELECT id FROM people ORDER BY id");
      expect(after.map((r) => Number(r.id))).toEqual([2, 100]);
    });
  });
});
