// The sample app's contacts import with real writes: a generated CSV (1,000,000 rows by
// default) imported by one import job that a worker runs, every row written to the contacts
// table inside the queue's checkpoints (each batch commits with the import's progress). From
// bench/ (tsx is bench's dependency, not the root's):
//   npx tsx import-export/import-writes.ts [rows] [--backend=postgres|sqlite|mariadb] [--importer=insert|upsert] [--batch=N]
// `insert`: one multi-row INSERT per batch (on PostgreSQL, one INSERT … SELECT FROM unnest of
// four arrays); `upsert`: the sample's own importer (src/contacts.ts: reads the batch's emails,
// then INSERT … ON CONFLICT DO UPDATE, so a file imported twice duplicates nothing). The import
// runs in a child process, so the peak RSS printed is the import's own (worker, driver and
// parser included).
// The sample's tables exist on PostgreSQL (schema bench_import, dropped before and after) and
// SQLite (a temporary file) only: on MariaDB (BENCH_MARIADB_URL, default
// mysql://root@127.0.0.1:3306/test) the queue lives in the database bench_import (the `schema`
// option; dropped before and after) and this script creates the contacts table there itself
// (the sample's columns, InnoDB, UNIQUE (org, email), utf8mb4_nopad_bin as the queue's tables);
// its `upsert` is the sample's importer in MariaDB's form (the same read of the batch's emails,
// then INSERT … ON DUPLICATE KEY UPDATE, updated_at only moved when name or age changed).
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { connect, enqueue, migrate, runWorker, type JobsDatabase } from "@forge/jobs";
import { createImportHandler, importPayload, IMPORT_JOB_TASK, type Importer } from "../../packages/import-export/src/index.js";
import { CONTACTS_HEADER, batchCounts, contactRows, contactsImporter, validateContact, type Contact } from "../../apps/sample/src/contacts.js";
import { openDatabase, type Sql } from "../../apps/sample/src/db.js";
import { migrateApp } from "../../apps/sample/src/migrate.js";
import { inChild, mb } from "./child.js";

/** Issue 21.7: the import's peak RSS stays under this. */
export const LIMIT_MB = 150;
const ORG = "org-bench";
const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const MARIADB_URL = process.env.BENCH_MARIADB_URL ?? "mysql://root@127.0.0.1:3306/test";
const SCHEMA = "bench_import";

export interface Options {
  rows: number;
  backend: "postgres" | "sqlite" | "mariadb";
  importer: "insert" | "upsert";
  batch: number;
}

interface Measure {
  /** RSS once the modules are loaded and the database is open, before the import starts. */
  baseRssMb: number;
  imported: number;
  inTable: number;
  seconds: number;
  peakRssMb: number;
}

function options(argv: string[]): Options {
  const flag = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
  const backend = flag("backend") ?? "postgres";
  const importer = flag("importer") ?? "insert";
  if (backend !== "postgres" && backend !== "sqlite" && backend !== "mariadb") throw new Error(`--backend must be postgres, sqlite or mariadb, got ${backend}`);
  if (importer !== "insert" && importer !== "upsert") throw new Error(`--importer must be insert or upsert, got ${importer}`);
  const rows = Number(argv.find((a) => /^\d+$/.test(a)) ?? 1_000_000);
  return { rows, backend, importer, batch: Number(flag("batch") ?? 500) };
}

/**
 * What the importers write through: the sample's AppDatabase on PostgreSQL and SQLite; on
 * MariaDB, where the sample refuses to open (its tables have no MariaDB migration), the same
 * shape made by `openMariadb`.
 */
interface ContactsDatabase {
  readonly jobs: JobsDatabase;
  /** Quoted, qualified contacts table. */
  readonly contacts: string;
  readonly sql: Sql;
  /** The SQL runner on the driver object a checkpoint hands its work (a mysql2 connection on MariaDB). */
  on(tx: unknown): Sql;
  close(): Promise<void>;
}

/** The queue in the database SCHEMA (created by migrate, dropped first), and the sample's contacts table made here. */
async function openMariadb(): Promise<ContactsDatabase> {
  const jobs = connect(MARIADB_URL, { schema: SCHEMA });
  const contacts = `\`${SCHEMA}\`.\`contacts\``;
  await jobs.executor.query(`DROP DATABASE IF EXISTS \`${SCHEMA}\``);
  await migrate({ db: jobs });
  // The sample's columns (apps/sample/src/db.ts); name and email at the lengths validateContact allows.
  await jobs.executor.query(`CREATE TABLE ${contacts} (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    org VARCHAR(255) NOT NULL,
    email VARCHAR(254) NOT NULL,
    name VARCHAR(200) NOT NULL,
    age INT CHECK (age BETWEEN 0 AND 150),
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    UNIQUE KEY contacts_org_email (org, email)
  ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`);
  return {
    jobs,
    contacts,
    sql: jobs.executor,
    on: (tx) => (tx === undefined || tx === null ? jobs.executor : jobs.bind(tx).executor),
    close: () => jobs.close(),
  };
}

/** A plain importer: every valid row of a batch inserted, in one statement, in the checkpoint's transaction. */
function insertImporter(db: ContactsDatabase): Importer<Contact> {
  return {
    header: { required: [...CONTACTS_HEADER.required], optional: [...CONTACTS_HEADER.optional], aliases: CONTACTS_HEADER.aliases },
    validate: (row) => validateContact(row),
    async writeBatch(values, tx) {
      if (values.length === 0) return;
      const sql = db.on(tx);
      const { rows, params } = contactRows(sql.dialect, ORG, values);
      await sql.query(`INSERT INTO ${db.contacts} (org, email, name, age) ${rows}`, params);
    },
  };
}

/**
 * The sample's upsert (contactsImporter) in MariaDB's form: the batch's emails read first for
 * the created/updated/unchanged counts, then INSERT … ON DUPLICATE KEY UPDATE on (org, email),
 * so a file imported twice duplicates nothing. updated_at is assigned first (MariaDB assigns
 * left to right): it moves only when name or age changes, and an unchanged row is not written.
 */
function mariadbUpsertImporter(db: ContactsDatabase, org: string): Importer<Contact> {
  return {
    header: { required: [...CONTACTS_HEADER.required], optional: [...CONTACTS_HEADER.optional], aliases: CONTACTS_HEADER.aliases },
    naturalKey: ["email"],
    validate: (row) => validateContact(row),
    async writeBatch(values, tx) {
      if (values.length === 0) return { created: 0, updated: 0, unchanged: 0 };
      const sql = db.on(tx);
      const counts = await batchCounts(sql, db.contacts, org, values);
      const { rows, params } = contactRows(sql.dialect, org, values);
      await sql.query(
        `INSERT INTO ${db.contacts} (org, email, name, age) ${rows}
         ON DUPLICATE KEY UPDATE
           updated_at = IF(name <=> VALUES(name) AND age <=> VALUES(age), updated_at, UTC_TIMESTAMP(6)),
           name = VALUES(name), age = VALUES(age)`,
        params,
      );
      return counts;
    },
  };
}

async function importOnly(dir: string, o: Options): Promise<void> {
  let db: ContactsDatabase;
  let importer: Importer<Contact>;
  if (o.backend === "mariadb") {
    db = await openMariadb();
    importer = o.importer === "insert" ? insertImporter(db) : mariadbUpsertImporter(db, ORG);
  } else {
    const app = openDatabase({
      databaseUrl: o.backend === "postgres" ? PG_URL : `sqlite:${path.join(dir, "contacts.sqlite")}`,
      databaseSchema: o.backend === "postgres" ? SCHEMA : undefined,
    });
    if (o.backend === "postgres") await app.sql.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await migrateApp(app);
    db = app;
    importer = o.importer === "insert" ? insertImporter(app) : contactsImporter(app, ORG);
  }
  const jobId = await enqueue(IMPORT_JOB_TASK, importPayload({ importer: "contacts", file: "contacts.csv" }), { db: db.jobs, tenant: ORG });
  const baseRssMb = mb(process.memoryUsage.rss());
  const stop = new AbortController();
  let report: { imported: number } | null = null;
  let failure: unknown = null;
  const started = performance.now();
  await runWorker(
    {
      [IMPORT_JOB_TASK]: async (payload, ctx) => {
        const handle = createImportHandler({ importers: { contacts: importer }, baseDir: dir, batchSize: o.batch });
        report = (await handle(payload, ctx)) as { imported: number };
        return null;
      },
    },
    {
      db: db.jobs,
      concurrency: 1,
      signal: stop.signal,
      events: {
        "job:succeeded": (e) => void (e.job.id === jobId && stop.abort()),
        "job:failed": (e) => {
          failure = e.error;
          stop.abort();
        },
      },
    },
  );
  const seconds = (performance.now() - started) / 1000;
  if (failure) throw failure instanceof Error ? failure : new Error(`the import failed: ${String(failure)}`);
  const { rows } = await db.sql.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${db.contacts} WHERE org = $1`, [ORG]);
  const measure: Measure = {
    baseRssMb,
    imported: (report as { imported: number } | null)?.imported ?? 0,
    inTable: Number(rows[0]?.n ?? 0),
    seconds,
    peakRssMb: mb(process.resourceUsage().maxRSS * 1024),
  };
  if (o.backend === "postgres") await db.sql.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  if (o.backend === "mariadb") await db.sql.query(`DROP DATABASE IF EXISTS \`${SCHEMA}\``);
  await db.close();
  process.stdout.write(JSON.stringify(measure));
}

async function generate(file: string, rows: number): Promise<void> {
  const out = createWriteStream(file);
  out.write("email,name,age\n");
  for (let i = 1; i <= rows; i++) {
    if (!out.write(`person${i}@example.com,Person ${i},${i % 100}\n`)) await once(out, "drain");
  }
  out.end();
  await once(out, "finish");
}

/** What one import measured, as `pnpm bench --only=import` records it. */
export interface ImportWritesResult {
  fileMb: number;
  seconds: number;
  /** Rows per second, from the worker's start until the import job succeeded. */
  rate: number;
  peakRssMb: number;
  /** RSS once the modules are loaded and the database is open, before the import starts. */
  baseRssMb: number;
}

/** Generates the file, imports it in a child process (this process's Node flags, so tsx), checks every row arrived. */
export async function measureImportWrites(o: Options): Promise<ImportWritesResult> {
  const dir = await mkdtemp(path.join(tmpdir(), "forge-import-writes-"));
  try {
    const file = path.join(dir, "contacts.csv");
    await generate(file, o.rows);
    const { size } = await stat(file);
    const args = [`--backend=${o.backend}`, `--importer=${o.importer}`, `--batch=${o.batch}`];
    const m = await inChild<Measure>(SCRIPT, ["--import-only", dir, String(o.rows), ...args]);
    if (m.imported !== o.rows || m.inTable !== o.rows) throw new Error(`imported ${m.imported} and found ${m.inTable} rows of ${o.rows}`);
    return { fileMb: mb(size), seconds: m.seconds, rate: o.rows / m.seconds, peakRssMb: m.peakRssMb, baseRssMb: m.baseRssMb };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function main(o: Options): Promise<void> {
  const m = await measureImportWrites(o);
  console.log(
    `backend=${o.backend} importer=${o.importer} batch=${o.batch} rows=${o.rows} file=${m.fileMb}MB time=${m.seconds.toFixed(1)}s ` +
      `rate=${Math.round(m.rate)} rows/s peakRSS=${m.peakRssMb}MB (${m.baseRssMb}MB before the import) (node ${process.version}, ${process.platform}/${process.arch})`,
  );
  if (m.peakRssMb >= LIMIT_MB) {
    console.error(`peak RSS ${m.peakRssMb}MB is over the ${LIMIT_MB}MB limit`);
    process.exitCode = 1;
  }
}

// Run as a script (the CLI, or the child that imports); imported by bench/src/measures/import.ts, it does nothing.
const SCRIPT = fileURLToPath(import.meta.url);
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === SCRIPT) {
  if (process.argv[2] === "--import-only") await importOnly(process.argv[3]!, options(process.argv.slice(4)));
  else await main(options(process.argv.slice(2)));
}
