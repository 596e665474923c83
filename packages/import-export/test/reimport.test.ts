import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createImportHandler, importPayload } from "../src/index.js";
import { withTempDir } from "./support/harness.js";
import { SQL_BACKENDS, sqlUpsertImporter, type SqlJobBackend } from "./support/sql-job.js";

// Point 12 of issue 20 on each backend: a natural key and an upsert make importing the same
// file again harmless, and the report says what each import did.

function csv(rows: Array<[number, string, string]>): string {
  return `id,name,email,note\n${rows.map(([id, name, email]) => `${id},${name},${email},n`).join("\n")}\n`;
}

describe.each(SQL_BACKENDS)("idempotent re-import on $name", (backend) => {
  let db: SqlJobBackend;
  beforeEach(async () => {
    db = await backend.create();
  });
  afterEach(async () => {
    await db.close();
  });

  const table = async (): Promise<Array<[number, string, string]>> =>
    (await db.query("SELECT id, name, email FROM people ORDER BY id")).map((r) => [Number(r.id), String(r.name), String(r.email)]);

  it("the same file twice: no duplicate rows, the second report says unchanged; a changed file says created/updated/unchanged", async () => {
    await withTempDir(async (dir) => {
      const handler = createImportHandler({ importers: { people: sqlUpsertImporter() }, baseDir: dir, batchSize: 3 });
      const rows: Array<[number, string, string]> = Array.from({ length: 7 }, (_, i) => [i + 1, `P${i + 1}`, `p${i + 1}@x.org`]);
      await writeFile(path.join(dir, "a.csv"), csv(rows));

      const first = await handler(importPayload({ importer: "people", file: "a.csv" }), db.context(null));
      expect(first).toMatchObject({ read: 7, imported: 7, rejected: 0, created: 7, updated: 0, unchanged: 0, duplicates: 0 });
      expect(await table()).toEqual(rows);

      const again = await handler(importPayload({ importer: "people", file: "a.csv" }), db.context(null));
      expect(again).toMatchObject({ read: 7, imported: 7, rejected: 0, created: 0, updated: 0, unchanged: 7, duplicates: 0 });
      expect(await table()).toEqual(rows);
      // The counts are saved with the cursor, as a status page reads them.
      expect(await db.readProgress()).toMatchObject({ created: 0, updated: 0, unchanged: 7 });

      // Row 2 changes, row 8 is new, row 1 appears twice in the first batch: the later one wins.
      await writeFile(
        path.join(dir, "b.csv"),
        csv([
          [1, "Old", "p1@x.org"],
          [1, "P1", "p1@x.org"],
          [2, "Renamed", "p2@x.org"],
          [8, "P8", "p8@x.org"],
        ]),
      );
      const third = await handler(importPayload({ importer: "people", file: "b.csv" }), db.context(null));
      expect(third).toMatchObject({ read: 4, imported: 4, created: 1, updated: 1, unchanged: 1, duplicates: 1 });
      expect(await table()).toEqual([...rows.map((r): [number, string, string] => (r[0] === 2 ? [2, "Renamed", "p2@x.org"] : r)), [8, "P8", "p8@x.org"]]);

      // And b.csv again: nothing left to do.
      const fourth = await handler(importPayload({ importer: "people", file: "b.csv" }), db.context(null));
      expect(fourth).toMatchObject({ read: 4, imported: 4, created: 0, updated: 0, unchanged: 3, duplicates: 1 });
      expect(await table()).toHaveLength(8);
    });
  });
});
