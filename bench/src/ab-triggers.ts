/**
 * What counting triggers cost the hot path on PostgreSQL: the same processing run (runWorker,
 * concurrency 10, no-op jobs) on one schema with the triggers and with them dropped,
 * alternating, medians of the rounds. `tsx src/ab-triggers.ts [jobs] [rounds] [counts|minutes|awaited]`:
 * the finished-job counts (migration 7, the default), the chart's per-minute counts (migration 10),
 * or waitForJob's trigger on ended awaited jobs (migration 23, `awaited`).
 */
import { PG_URL } from "./lib/env.js";
import { adminClient } from "./lib/metrics.js";
import { median } from "./lib/stats.js";
import { processingRun } from "./measures/common.js";
import { pgForgeAdmin } from "./systems/pg-admin.js";
import { ForgeSystem } from "./systems/forge.js";

const jobs = Number(process.argv[2] ?? 20000);
const rounds = Number(process.argv[3] ?? 5);
const admin = await adminClient();
const schemas = { with: "bench_forge_ab_with", without: "bench_forge_ab_without" };
const systems = Object.fromEntries(
  Object.entries(schemas).map(([k, schema]) => [k, new ForgeSystem(k, k, "postgres", PG_URL, schema, pgForgeAdmin(admin))]),
) as Record<keyof typeof schemas, ForgeSystem>;
for (const [k, s] of Object.entries(systems)) {
  await admin.query(`DROP SCHEMA IF EXISTS ${schemas[k as keyof typeof schemas]} CASCADE`);
  await s.prepare();
}
const mode = process.argv[4];
const which = mode === "minutes" ? "minute" : "count";
// `awaited`: waitForJob's NOTIFY trigger on history (migration 23), whose WHEN is false for every job here.
const dropped = mode === "awaited" ? ["jobs_awaited_ended"] : ["insert", "update", "delete", "truncate"].map((op) => `jobs_${which}_${op}`);
const on = mode === "awaited" ? `${schemas.without}.jobs_history` : systems.without.table;
for (const name of dropped) {
  await admin.query(`DROP TRIGGER ${name} ON ${on}`);
}
const rates: Record<string, number[]> = { with: [], without: [] };
for (let r = 0; r < rounds; r++) {
  for (const k of r % 2 ? (["without", "with"] as const) : (["with", "without"] as const)) {
    const res = await processingRun(systems[k], "default", 10, jobs, 30, admin);
    rates[k]!.push(res.rate);
  }
  console.log(`round ${r + 1}: with ${Math.round(rates.with!.at(-1)!)} without ${Math.round(rates.without!.at(-1)!)}`);
}
const w = median(rates.with!);
const wo = median(rates.without!);
console.log(JSON.stringify({ jobs, rounds, rates, medianWith: w, medianWithout: wo, ratio: w / wo }));
for (const s of Object.values(systems)) await s.close();
for (const schema of Object.values(schemas)) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
await admin.end();
process.exit(0);
