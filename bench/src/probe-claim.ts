/**
 * What-if for the claim of @forge/jobs, on its own table (schema bench_forge) and with its own
 * SQL text as of this writing: a claim → complete loop (one claim in flight, like the worker) run
 * with the claim as sent today (queue = ANY($1), unnamed), as a named prepared statement, and
 * with `queue = $1` (index order), at the worker's default batch (concurrency + prefetch = 20 at
 * concurrency 10) and at 100. Nothing here is the public API: it only shows where the time goes.
 * `tsx src/probe-claim.ts [jobs]`.
 */
import pg from "pg";
import { performance } from "node:perf_hooks";
import { loadForge } from "./forge.js";
import { PG_URL, SCHEMA } from "./lib/env.js";

const n = Number(process.argv[2] ?? 20000);
const forge = await loadForge();
const db = forge.connect(PG_URL, { schema: SCHEMA.forge });
await forge.migrate({ db });
await db.close();
/**
 * --lean-indexes: the same on a copy of the table (schema bench_forge_probe) whose
 * idempotency_key and dedup_key unique indexes skip NULL keys (WHERE … IS NOT NULL), so a job
 * without keys writes 2 index entries fewer per row version.
 */
const lean = process.argv.includes("--lean-indexes");
let T = `"${SCHEMA.forge}"."jobs"`;
const claimSql = (where: string) => `
    WITH picked AS (
      SELECT id FROM ${T}
      WHERE status = 'pending' AND ${where} AND run_at <= now()
      ORDER BY priority DESC, id
      LIMIT $2
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${T} AS j
    SET status = 'running', attempts = j.attempts + 1, claim_token = gen_random_uuid(),
        locked_until = now() + make_interval(secs => $3), heartbeat_at = now(), locked_by = $4, updated_at = now()
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.task, j.payload, j.priority, j.attempts, j.max_attempts, j.progress, j.tenant,
              j.created_at, j.run_at, j.claim_token::text AS claim_token`;
const complete = () => `
    UPDATE ${T} AS j
    SET status = 'done', result = v.result::jsonb, finished_at = now(), updated_at = now(), locked_until = NULL
    FROM unnest($1::bigint[], $2::uuid[], $3::text[]) AS v(id, token, result)
    WHERE j.id = v.id AND j.claim_token = v.token AND j.status = 'running'
    RETURNING j.id`;

const client = new pg.Client({ connectionString: PG_URL });
await client.connect();
if (lean) {
  await client.query("DROP SCHEMA IF EXISTS bench_forge_probe CASCADE");
  await client.query("CREATE SCHEMA bench_forge_probe");
  await client.query(`CREATE TABLE bench_forge_probe.jobs (LIKE ${T} INCLUDING ALL)`);
  const { rows } = await client.query<{ indexname: string; indexdef: string }>(
    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'bench_forge_probe' AND tablename = 'jobs'",
  );
  for (const r of rows) {
    if (/\(idempotency_key\)/.test(r.indexdef)) {
      await client.query(`DROP INDEX bench_forge_probe."${r.indexname}"`);
      await client.query("CREATE UNIQUE INDEX ON bench_forge_probe.jobs (idempotency_key) WHERE idempotency_key IS NOT NULL");
    } else if (/\(dedup_key\)/.test(r.indexdef)) {
      await client.query(`DROP INDEX bench_forge_probe."${r.indexname}"`);
      await client.query("CREATE UNIQUE INDEX ON bench_forge_probe.jobs (dedup_key) WHERE dedup_key IS NOT NULL AND status IN ('pending', 'running')");
    }
  }
  T = "bench_forge_probe.jobs";
}
const COMPLETE = complete();
const variants: { label: string; sql: string; queue: unknown; named: boolean }[] = [
  { label: "as sent today: queue = ANY($1), unnamed", sql: claimSql("queue = ANY($1::text[])"), queue: ["default"], named: false },
  { label: "queue = ANY($1), named prepared", sql: claimSql("queue = ANY($1::text[])"), queue: ["default"], named: true },
  { label: "queue = $1, unnamed", sql: claimSql("queue = $1"), queue: "default", named: false },
  { label: "queue = $1, named prepared", sql: claimSql("queue = $1"), queue: "default", named: true },
];
for (const batch of [20, 100]) {
  for (const v of variants) {
    await client.query(`TRUNCATE ${T} RESTART IDENTITY`);
    await client.query(`INSERT INTO ${T} (queue, task, payload) SELECT 'default', 'noop', jsonb_build_object('i', g) FROM generate_series(1, $1::int) g`, [n]);
    await client.query("CHECKPOINT");
    const wal0 = (await client.query<{ l: string }>("SELECT pg_current_wal_lsn()::text AS l")).rows[0]!.l;
    let claimMs = 0;
    let completeMs = 0;
    let done = 0;
    const t0 = performance.now();
    for (;;) {
      const a = performance.now();
      const q = { text: v.sql, values: [v.queue, batch, 30, "probe"], ...(v.named ? { name: `probe_claim_${batch}_${v.label.length}` } : {}) };
      const { rows } = await client.query<{ id: string; claim_token: string }>(q);
      const b = performance.now();
      claimMs += b - a;
      if (rows.length === 0) break;
      await client.query({
        text: COMPLETE,
        values: [rows.map((r) => r.id), rows.map((r) => r.claim_token), rows.map(() => null)],
        ...(v.named ? { name: "probe_complete" } : {}),
      });
      completeMs += performance.now() - b;
      done += rows.length;
    }
    const s = (performance.now() - t0) / 1000;
    const wal = Number((await client.query<{ b: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS b", [wal0])).rows[0]!.b);
    console.log(
      `batch ${String(batch).padStart(3)}  ${v.label.padEnd(42)} ${Math.round(done / s)
        .toString()
        .padStart(
          6,
        )} jobs/s  claim ${(claimMs / (done / batch)).toFixed(2)} ms  complete ${(completeMs / (done / batch)).toFixed(2)} ms per batch  ${Math.round(wal / done)} WAL B/job`,
    );
  }
}
await client.query(`TRUNCATE ${T} RESTART IDENTITY`);
if (lean) await client.query("DROP SCHEMA bench_forge_probe CASCADE");
await client.end();
