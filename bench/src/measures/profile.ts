import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { PG_URL, SCHEMA } from "../lib/env.js";
import type { Ctx } from "./common.js";
import { TSX } from "./scale.js";

const BENCH = fileURLToPath(new URL("../..", import.meta.url));
const OUT = `${BENCH}results/tmp-profile`;

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

function category(url: string, fn: string): string {
  if (!url)
    return fn === "(idle)"
      ? "idle (waiting for I/O)"
      : fn === "(garbage collector)"
        ? "garbage collector"
        : fn === "(program)"
          ? "V8/native (program)"
          : `native ${fn}`;
  if (url.includes("/pg-protocol/")) return "pg-protocol (wire encode/decode)";
  if (/\/(pg-types|postgres-date|postgres-array|postgres-interval|postgres-bytea)\//.test(url)) return "pg-types (value parsing)";
  if (url.includes("/node_modules/pg/") || url.includes("/pg-pool/")) return "pg (client, pool)";
  const own = url.match(/packages\/jobs\/src\/(.+)$/);
  if (own) return `@forge/jobs ${own[1]}`;
  if (url.startsWith("node:")) return `node ${url.slice(5).split("/")[0]}`;
  if (url.includes("/bench/src/")) return "bench harness";
  return "other";
}

/** Self time per category and per function, from a V8 .cpuprofile. */
export function analyse(path: string): { byCategory: { name: string; share: number }[]; topFunctions: { name: string; where: string; share: number }[] } {
  const profile = JSON.parse(readFileSync(path, "utf8")) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, profile.timeDeltas[i] ?? 0)));
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const cats = new Map<string, number>();
  const fns = new Map<string, { where: string; us: number }>();
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const cat = category(url, functionName);
    cats.set(cat, (cats.get(cat) ?? 0) + us);
    const key = `${functionName || "(anonymous)"} ${url}:${lineNumber + 1}`;
    const f = fns.get(key) ?? {
      where: `${url.replace(/^.*node_modules\/\.pnpm\/[^/]+\/node_modules\//, "").replace(/^.*\/packages\//, "packages/")}:${lineNumber + 1}`,
      us: 0,
    };
    f.us += us;
    fns.set(key, f);
  }
  return {
    byCategory: [...cats.entries()].map(([name, us]) => ({ name, share: us / total })).sort((a, b) => b.share - a.share),
    topFunctions: [...fns.entries()]
      .filter(([k]) => !k.startsWith("(idle)") && !k.startsWith("(program)") && !k.startsWith("(garbage collector)"))
      .map(([k, f]) => ({ name: k.split(" ")[0]!, where: f.where, share: f.us / total }))
      .sort((a, b) => b.share - a.share)
      .slice(0, 15),
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

export async function run(ctx: Ctx): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const n = ctx.sizes.profileJobs;
  const concurrency = 10;
  execFileSync(process.execPath, ["--import", TSX, `${BENCH}src/profile-child.ts`, String(n), String(concurrency), OUT], { cwd: BENCH, stdio: "inherit" });
  const summary = JSON.parse(readFileSync(`${OUT}/forge-c${concurrency}.json`, "utf8")) as Record<string, any>;
  const cpu = analyse(`${OUT}/forge-c${concurrency}.cpuprofile`);

  // Server side: why the claim's form matters — the plan of a claim with `queue = ANY($1)`
  // against `queue = $1`, with a backlog of N pending jobs, and with 1M done rows.
  const plans: Record<string, string[]> = {};
  const claimSql = (schema: string) => `
    SELECT id FROM ${schema}.jobs
    WHERE status = 'pending' AND queue = ANY($1::text[]) AND run_at <= now()
    ORDER BY priority DESC, id LIMIT 20 FOR UPDATE SKIP LOCKED`;
  const single = (schema: string) => `
    SELECT id FROM ${schema}.jobs
    WHERE status = 'pending' AND queue = $1 AND run_at <= now()
    ORDER BY priority DESC, id LIMIT 20 FOR UPDATE SKIP LOCKED`;
  const explain = async (label: string, sql: string, param: unknown) => {
    await ctx.admin.query("BEGIN");
    try {
      const { rows } = await ctx.admin.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, [param]);
      plans[label] = rows.map((r) => r["QUERY PLAN"]);
    } finally {
      await ctx.admin.query("ROLLBACK");
    }
  };
  // In a scratch schema: an ANALYZE of the measured tables would change later runs' plans.
  const scratch = "bench_forge_explain";
  const { loadForge } = await import("../forge.js");
  const forge = await loadForge();
  const sdb = forge.connect(PG_URL, { schema: scratch });
  await forge.migrate({ db: sdb });
  await sdb.close();
  const t = `${scratch}.jobs`;
  await ctx.admin.query(`INSERT INTO ${t} (queue, task, payload) SELECT 'default', 'noop', jsonb_build_object('i', g) FROM generate_series(1, $1::int) g`, [n]);
  await ctx.admin.query(`ANALYZE ${t}`);
  await explain(`claim with queue = ANY($1) (the form before 942b836), ${n} pending`, claimSql(scratch), ["default"]);
  await explain(`claim with queue = $1, ${n} pending`, single(scratch), "default");
  await ctx.admin.query(`DROP SCHEMA ${scratch} CASCADE`);
  const has1m = (await ctx.admin.query(`SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'jobs'`, [SCHEMA.forge1m])).rowCount;
  if (has1m) {
    const t1 = `${SCHEMA.forge1m}.jobs`;
    await ctx.admin.query(`INSERT INTO ${t1} (queue, task, payload) SELECT 'default', 'noop', jsonb_build_object('i', g) FROM generate_series(1, $1::int) g`, [
      n,
    ]);
    await explain(`claim with queue = ANY($1), ${n} pending + 1M done rows`, claimSql(SCHEMA.forge1m), ["default"]);
    await explain(`claim with queue = $1, ${n} pending + 1M done rows`, single(SCHEMA.forge1m), "default");
    await ctx.admin.query(`DELETE FROM ${t1} WHERE status <> 'done'`);
  }
  const indexes = (
    await ctx.admin.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_indexes WHERE schemaname = $1 AND tablename = 'jobs'`, [SCHEMA.forge])
  ).rows[0]!.n;

  ctx.results.profile = { summary, cpu, plans, indexes: Number(indexes) };
  console.log(`\n== Profile: @forge/jobs, ${n} no-op jobs, concurrency ${concurrency}, defaults ==`);
  console.log(
    `rate ${Math.round(summary.rate)} jobs/s; per job: ${summary.statementsPerJob.toFixed(2)} statements, ${summary.commitsPerJob.toFixed(2)} commits (pg_stat_database), ${Math.round(summary.walBytesPerJob)} WAL bytes, ${summary.tupleUpdatesPerJob.toFixed(2)} row updates (${pct(summary.hotUpdateShare)} HOT; ${indexes} indexes on the table), ${Math.round(summary.nodeCpuUsPerJob)} µs Node CPU; event loop busy ${pct(summary.eventLoopUtilization)}`,
  );
  if (summary.deadlocks || summary.workerErrorCount)
    console.log(
      `deadlocks on the server during the run: ${summary.deadlocks}; worker:error events: ${summary.workerErrorCount}${summary.workerErrors.length ? ` (${summary.workerErrors.join(" | ")})` : ""}`,
    );
  console.log("statements (client-observed round trip, including time queued behind others on the connection):");
  for (const s of summary.statements.slice(0, 8))
    console.log(`  ${s.perJob.toFixed(3)}/job  mean ${s.meanMs.toFixed(2)} ms  total ${(s.totalMs / 1000).toFixed(2)} s  ${s.sql}`);
  for (const e of summary.explained ?? [])
    console.log(`  replayed under EXPLAIN ANALYZE: planning ${e.planningMs} ms, execution ${e.executionMs} ms — ${e.sql}`);
  if (summary.preparedEnqueue)
    console.log(
      `  enqueue statement in a transaction: ${Math.round(summary.preparedEnqueue.unnamedUs)} µs unnamed (as sent) vs ${Math.round(summary.preparedEnqueue.namedUs)} µs as a named prepared statement`,
    );
  console.log("Node self time by category (share of the run's samples):");
  for (const c of cpu.byCategory.slice(0, 12)) console.log(`  ${pct(c.share).padStart(6)}  ${c.name}`);
  console.log("top functions by self time:");
  for (const f of cpu.topFunctions.slice(0, 10)) console.log(`  ${pct(f.share).padStart(6)}  ${f.name}  ${f.where}`);
  for (const [label, lines] of Object.entries(plans)) {
    const exec = lines.find((l) => l.startsWith("Execution Time"));
    const scan = lines.find((l) => /Scan|Sort/.test(l))?.trim();
    console.log(`plan — ${label}: ${exec}; ${scan}`);
  }
}
