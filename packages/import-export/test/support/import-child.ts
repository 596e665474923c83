// Runs one import attempt in its own process, so the test can SIGKILL it mid-import.
// FORMAT=xlsx reads the file as a workbook through @forge/import-export/xlsx.
import pg from "pg";
import { createImportHandler, importPayload } from "../../src/index.js";
import { DATABASE_URL, pgJobContext, pgPeopleImporter, readJobProgress } from "./pg-job.js";

const { SCHEMA, BASE_DIR, FILE, CLAIM_TOKEN, BATCH_SIZE, PAUSE_MS, FORMAT } = process.env;
if (!SCHEMA || !BASE_DIR || !FILE || !CLAIM_TOKEN) throw new Error("SCHEMA, BASE_DIR, FILE and CLAIM_TOKEN are required");

const formats = FORMAT === "xlsx" ? [(await import("../../src/xlsx.js")).xlsxFormat()] : undefined;
const client = new pg.Client({ connectionString: DATABASE_URL });
await client.connect();
try {
  const handler = createImportHandler({
    importers: { people: pgPeopleImporter(SCHEMA, Number(PAUSE_MS ?? 0)) },
    baseDir: BASE_DIR,
    batchSize: Number(BATCH_SIZE ?? 100),
    formats,
  });
  const ctx = pgJobContext(client, SCHEMA, 1, CLAIM_TOKEN, await readJobProgress(client, SCHEMA));
  const report = await handler(importPayload({ importer: "people", file: FILE }), ctx);
  process.stdout.write(`${JSON.stringify(report)}\n`);
} finally {
  await client.end();
}
