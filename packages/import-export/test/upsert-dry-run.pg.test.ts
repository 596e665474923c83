import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createImportHandler, importPayload, type ImportProgress, type Importer, type JobContextLike, type WriteCounts } from "../src/index.js";
import { rejection, withTempDir } from "./support/harness.js";
import { createJobSchema, DATABASE_URL, pgJobContext, readJobProgress } from "./support/pg-job.js";
import { validatePerson, type Person } from "./support/people.js";

const postgresOn = !process.env.FORGE_TEST_BACKENDS || process.env.FORGE_TEST_BACKENDS.split(",").includes("postgres");
let admin: pg.Client;
const schemas: string[] = [];

beforeAll(async () => {
  if (!postgresOn) return;
  admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
});
afterAll(async () => {
  if (!postgresOn) return;
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
});

async function newSchema(token: string): Promise<string> {
  const schema = `ie_up_${randomUUID().replaceAll("-", "")}`;
  schemas.push(schema);
  await createJobSchema(admin, schema, token);
  return schema;
}

/** An upsert by id that says what it did: the natural-key contract. */
function upsertImporter(schema: string, failOnCall?: number): Importer<Person, pg.Client> {
  let calls = 0;
  return {
    validate: validatePerson,
    naturalKey: ["id"],
    async writeBatch(values, tx): Promise<WriteCounts> {
      calls += 1;
      if (calls === failOnCall) throw new Error("the worker dies here");
      const client = tx!;
      const ids = values.map((v) => v.id);
      const { rows } = await client.query<{ id: number; name: string; email: string; note: string }>(
        `SELECT id, name, email, note FROM ${schema}.people WHERE id = ANY($1::int[])`,
        [ids],
      );
      const before = new Map(rows.map((r) => [r.id, r]));
      const counts = { created: 0, updated: 0, unchanged: 0 };
      for (const v of values) {
        const old = before.get(v.id);
        if (old === undefined) counts.created += 1;
        else if (old.name === v.name && old.email === v.email && old.note === v.note) counts.unchanged += 1;
        else counts.updated += 1;
      }
      await client.query(
        `INSERT INTO ${schema}.people (id, name, email, note)
         SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[])
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, email = excluded.email, note = excluded.note`,
        [ids, values.map((v) => v.name), values.map((v) => v.email), values.map((v) => v.note)],
      );
      return counts;
    },
  };
}

function csv(rows: Array<[number, string, string]>): string {
  return `id,name,email,note\n${rows.map(([id, name, email]) => `${id},${name},${email},n`).join("\n")}\n`;
}

async function people(schema: string): Promise<number> {
  const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.people`);
  return Number(rows[0]!.n);
}

describe.skipIf(!postgresOn)("natural key and rejects file (PostgreSQL)", () => {
  it("a second import of the same file creates nothing; changed rows count as updated; duplicates in a batch as duplicates", async () => {
    await withTempDir(async (dir) => {
      const token = randomUUID();
      const schema = await newSchema(token);
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      try {
        const handler = createImportHandler({ importers: { people: upsertImporter(schema) }, baseDir: dir, batchSize: 3 });
        const rows: Array<[number, string, string]> = Array.from({ length: 7 }, (_, i) => [i + 1, `P${i + 1}`, `p${i + 1}@x.org`]);
        await writeFile(path.join(dir, "a.csv"), csv(rows));
        const first = await handler(importPayload({ importer: "people", file: "a.csv" }), pgJobContext(client, schema, 1, token, null));
        expect(first).toMatchObject({ read: 7, imported: 7, created: 7, updated: 0, unchanged: 0, duplicates: 0 });
        const again = await handler(importPayload({ importer: "people", file: "a.csv" }), pgJobContext(client, schema, 1, token, null));
        expect(again).toMatchObject({ imported: 7, created: 0, updated: 0, unchanged: 7 });
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
        const third = await handler(importPayload({ importer: "people", file: "b.csv" }), pgJobContext(client, schema, 1, token, null));
        expect(third).toMatchObject({ read: 4, imported: 4, created: 1, updated: 1, unchanged: 1, duplicates: 1 });
        expect(await people(schema)).toBe(8);
      } finally {
        await client.end();
      }
    });
  });

  it("the counts stay exact when an import resumes after dying mid-file", async () => {
    await withTempDir(async (dir) => {
      const token = randomUUID();
      const schema = await newSchema(token);
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      try {
        await writeFile(path.join(dir, "a.csv"), csv(Array.from({ length: 10 }, (_, i) => [i + 1, `P${i + 1}`, `p${i + 1}@x.org`])));
        const dying = createImportHandler({ importers: { people: upsertImporter(schema, 3) }, baseDir: dir, batchSize: 3 });
        await rejection(dying(importPayload({ importer: "people", file: "a.csv" }), pgJobContext(client, schema, 1, token, null)));
        const saved = (await readJobProgress(client, schema)) as unknown as ImportProgress;
        expect(saved).toMatchObject({ read: 6, created: 6 });
        const resumed = createImportHandler({ importers: { people: upsertImporter(schema) }, baseDir: dir, batchSize: 3 });
        const report = await resumed(importPayload({ importer: "people", file: "a.csv" }), pgJobContext(client, schema, 1, token, saved));
        expect(report).toMatchObject({ read: 10, imported: 10, created: 10, updated: 0, unchanged: 0 });
      } finally {
        await client.end();
      }
    });
  });

  it("writes rejected rows to a CSV to fix and upload again, and a resumed import does not write them twice", async () => {
    await withTempDir(async (dir) => {
      const token = randomUUID();
      const schema = await newSchema(token);
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      try {
        const rows: Array<[number, string, string]> = Array.from({ length: 9 }, (_, i) => [i + 1, `P${i + 1}`, i % 3 === 0 ? "nope" : `p${i + 1}@x.org`]);
        await writeFile(path.join(dir, "a.csv"), csv(rows));
        const payload = importPayload({ importer: "people", file: "a.csv", rejectsFile: "a.rejects.csv" });
        // Dies writing the third batch: the rejects of that batch reached the file, its checkpoint did not commit.
        const dying = createImportHandler({ importers: { people: upsertImporter(schema, 3) }, baseDir: dir, batchSize: 3 });
        await rejection(dying(payload, pgJobContext(client, schema, 1, token, null)));
        const saved = (await readJobProgress(client, schema)) as unknown as ImportProgress;
        const handler = createImportHandler({ importers: { people: upsertImporter(schema) }, baseDir: dir, batchSize: 3 });
        const report = await handler(payload, pgJobContext(client, schema, 1, token, saved));
        expect(report).toMatchObject({ read: 9, imported: 6, rejected: 3, rejectsFile: "a.rejects.csv" });
        const text = await readFile(path.join(dir, "a.rejects.csv"), "utf8");
        expect(text).toBe(
          [
            "id,name,email,note,import_line,import_errors",
            "1,P1,nope,n,2,email: must be an email address",
            "4,P4,nope,n,5,email: must be an email address",
            "7,P7,nope,n,8,email: must be an email address",
            "",
          ].join("\n"),
        );
        // Fixed by hand and uploaded again: the extra columns are ignored, the rows import.
        await writeFile(path.join(dir, "fixed.csv"), text.replace(/^(\d+),(P\d+),nope/gm, "$1,$2,fixed$1@x.org"));
        const fixed = await handler(importPayload({ importer: "people", file: "fixed.csv" }), pgJobContext(client, schema, 1, token, null));
        expect(fixed).toMatchObject({ read: 3, imported: 3, rejected: 0, updated: 0, created: 3 });
      } finally {
        await client.end();
      }
    });
  });
});

// The dry run against the database's constraints runs on all three backends in dry-run.test.ts.
// The handler refuses a dry run it cannot roll back.
describe("dry run without a checkpoint", () => {
  it("fails at once: there is no transaction to roll back", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "a.csv"), csv([[1, "P1", "p1@x.org"]]));
      const handler = createImportHandler({ importers: { people: upsertImporter("unused") }, baseDir: dir });
      const error = await rejection(handler(importPayload({ importer: "people", file: "a.csv", dryRun: true }), {} as JobContextLike));
      expect(error.retryable).toBe(false);
      expect(error.message).toMatch(/a dry run needs ctx.checkpoint/);
    });
  });
});
