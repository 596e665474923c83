import type { JobsDatabase } from "../core/database.js";
import { EXTRA_COLUMNS, extraColumns, insertColumns, type NewJob } from "./new-job.js";

/** A column of the PostgreSQL insert: its value in a job, its SQL type, how the row uses it. */
interface PgColumn {
  value: (job: NewJob) => unknown;
  type: string;
  expr: (ref: string) => string;
}

const PG_COLUMNS: readonly PgColumn[] = [
  { value: (j) => j.queue, type: "text", expr: (r) => r },
  { value: (j) => j.task, type: "text", expr: (r) => r },
  { value: (j) => j.payload, type: "text", expr: (r) => `${r}::jsonb` },
  { value: (j) => j.priority, type: "int", expr: (r) => r },
  { value: (j) => j.maxAttempts, type: "int", expr: (r) => r },
  { value: (j) => j.delay, type: "float8", expr: (r) => `now() + make_interval(secs => ${r})` },
  { value: (j) => j.tenant, type: "text", expr: (r) => r },
  { value: (j) => j.idempotencyKey, type: "text", expr: (r) => r },
  { value: (j) => j.dedupKey, type: "text", expr: (r) => r },
  { value: (j) => j.trace, type: "text", expr: (r) => `${r}::jsonb` },
  { value: (j) => j.group, type: "text", expr: (r) => r },
  { value: (j) => j.concurrencyKey, type: "text", expr: (r) => r },
  { value: (j) => j.maxSnoozes, type: "int", expr: (r) => r },
];
const PAYLOAD_COLUMN = 2;
/** The PostgreSQL types of the extra columns (new-job.ts), which a chunk names only when it needs them. */
const EXTRA_TYPES: Readonly<Record<string, string>> = { due: "bool", dead_letter: "text", aging_base: "int", aging_every: "int", aging_max: "int" };

/**
 * One PostgreSQL statement for one row or thousands: a NOTIFY per queue that has a job ready
 * now, ids out. A column whose value every job of the chunk shares (the queue, the task, the
 * priority… of a typical bulk enqueue) is sent once, as a scalar; only the others go in as
 * arrays for unnest — building, escaping and parsing arrays of identical values was a third
 * of a bulk insert's cost. ON CONFLICT only when a job has a key: without one no unique index
 * can conflict, and every row skips the speculative insertion. One job: no arrays at all.
 */
export function pgInsert(db: JobsDatabase, jobs: readonly NewJob[]): { sql: string; params: unknown[]; keyless: boolean } {
  const params: unknown[] = [db.channel];
  const arrays: string[] = [];
  const names: string[] = [];
  const extras = extraColumns(jobs);
  const columns = insertColumns(extras);
  const extra = extras.flatMap((e) => EXTRA_COLUMNS[e].columns.map((c): PgColumn => ({ value: c.value, type: EXTRA_TYPES[c.name] as string, expr: (r) => r })));
  const exprs = [...PG_COLUMNS, ...extra].map((column, c) => {
    const first = column.value(jobs[0] as NewJob);
    const shared = c === PAYLOAD_COLUMN ? jobs.length === 1 : jobs.every((j) => column.value(j) === first);
    if (shared) {
      params.push(first);
      return column.expr(`$${params.length}::${column.type}`);
    }
    names.push(`c${c}`);
    if (c === PAYLOAD_COLUMN) {
      // Payloads are JSON text already: one JSON array of them is a join, where a text[]
      // literal escapes every quote of every payload (pg's escapeElement) and PostgreSQL
      // unescapes it again. A JSON null element is a job without payload (SQL NULL).
      params.push(`[${jobs.map((j) => j.payload ?? "null").join(",")}]`);
      arrays.push(`jsonb_array_elements($${params.length}::jsonb)`);
      return `NULLIF(v.c${c}, 'null'::jsonb)`;
    }
    params.push(jobs.map(column.value));
    arrays.push(`unnest($${params.length}::${column.type}[])`);
    return column.expr(`v.c${c}`);
  });
  const keyed = jobs.some((j) => j.idempotencyKey !== null || j.dedupKey !== null);
  const conflict = keyed ? "ON CONFLICT DO NOTHING" : "";
  if (arrays.length === 0) {
    // One job: a plain VALUES row and its NOTIFY inline, lighter to plan than the unnest form.
    // Without keys, only the id comes back; a job due now notifies, a delayed one does not.
    const job = jobs[0] as NewJob;
    // ($1, the channel, must appear in the statement either way, or it has no type. The column
    // is text, not pg_notify's void: an ORM's raw query (Prisma) refuses to read a void column.)
    const woke = job.delay === 0 ? "pg_notify($1, queue)::text" : "$1::text";
    const sql = keyed
      ? `
      WITH ins AS (
        INSERT INTO ${db.table} (${columns}) VALUES (${exprs.join(", ")}) ${conflict}
        RETURNING id, queue, run_at <= now() AS ready, idempotency_key, dedup_key
      )
      SELECT id, idempotency_key, dedup_key, CASE WHEN ready THEN pg_notify($1, queue)::text END AS woke FROM ins`
      : `
      WITH ins AS (INSERT INTO ${db.table} (${columns}) VALUES (${exprs.join(", ")}) RETURNING id, queue)
      SELECT id, ${woke} AS woke FROM ins`;
    return { sql, params, keyless: !keyed };
  }
  // Ids follow input order: the identity is drawn row by row, in ORDER BY ord.
  // ROWS FROM zips the arrays element by element, as a multi-argument unnest does.
  const source = `FROM ROWS FROM (${arrays.join(", ")}) WITH ORDINALITY AS v(${names.join(", ")}, ord) ORDER BY ord`;
  // Without keys nothing can conflict: every job gets a row, and the ids come back as one
  // array in id order (= input order) instead of a row each.
  const result = keyed
    ? "SELECT id, idempotency_key, dedup_key, (SELECT n FROM woke) AS woke FROM ins ORDER BY id"
    : "SELECT array_agg(id ORDER BY id)::text AS ids, (SELECT n FROM woke) AS woke FROM ins";
  const sql = `
    WITH ins AS (
      INSERT INTO ${db.table} (${columns})
      SELECT ${exprs.join(", ")} ${source}
      ${conflict}
      RETURNING id, queue, run_at <= now() AS ready, idempotency_key, dedup_key
    ), woke AS (
      SELECT count(pg_notify($1, queue)) AS n FROM (SELECT DISTINCT queue FROM ins WHERE ready) r
    )
    ${result}`;
  return { sql, params, keyless: !keyed };
}
