import { performance } from "node:perf_hooks";
import { PG_URL, SCHEMA } from "../lib/env.js";
import { historyOf, historySize, insertEndedPg, legacyEndedRows, liveIdsAbove, rebuildFinishedCounts } from "../lib/fixtures.js";
import type { Row } from "../lib/report.js";
import { rotate } from "../lib/stats.js";
import { ForgeSystem } from "../systems/forge.js";
import { pgForgeAdmin } from "../systems/pg-admin.js";
import { addCosts, addSample, COST_COLUMNS, processingRun, type Ctx } from "./common.js";

/**
 * Claim rate with 1,000,000 finished jobs kept against none: the same processing run
 * (concurrency 10, defaults) in two schemas. The done rows are written once into history (where
 * every ended job lives since migration 14) with one INSERT … SELECT FROM generate_series
 * (triggers off, the counts rebuilt after), then VACUUM ANALYZE (what autovacuum would have done
 * by the time a real table got there); jobs processed during the runs stay in history too.
 */
export async function run(ctx: Ctx): Promise<void> {
  const { bloatRows, bloatJobs: n, rounds } = ctx.sizes;
  const admin = ctx.admin;
  const empty = new ForgeSystem("forge", "@forge/jobs, empty table", "postgres", PG_URL, SCHEMA.forge, pgForgeAdmin(admin));
  const base = pgForgeAdmin(admin);
  // Never truncate the fixture: between runs only leftovers that are not done go, and a VACUUM
  // clears the dead row versions and claim-index entries the previous run left, so every run
  // meets the same table (the empty one is truncated).
  const full = new ForgeSystem("forge-1m", `@forge/jobs, ${bloatRows.toLocaleString("en-US")} done rows`, "postgres", PG_URL, SCHEMA.forge1m, {
    reset: async (table) => {
      await admin.query(`DELETE FROM ${table} WHERE status <> 'done'`);
      await admin.query(`VACUUM ${table}`);
    },
    unfinished: base.unfinished,
  });
  await empty.prepare();
  await full.prepare();
  const table = full.table;
  const history = historyOf(SCHEMA.forge1m);
  const have = Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${history} WHERE status = 'done'`)).rows[0]!.n);
  // A fixture of before migration 14 (done rows in the live table) is written again, in history.
  if (have < bloatRows || (await legacyEndedRows(admin, SCHEMA.forge1m))) {
    const t0 = performance.now();
    await admin.query(`TRUNCATE ${table}, ${history}`);
    await insertEndedPg(admin, SCHEMA.forge1m, 1, bloatRows, 1);
    await rebuildFinishedCounts(admin, SCHEMA.forge1m, history);
    await liveIdsAbove(admin, SCHEMA.forge1m);
    await admin.query(`VACUUM ANALYZE ${history}`);
    console.log(`  wrote ${bloatRows} done rows into history in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  } else {
    console.log(`  reusing ${have} done rows in ${history}`);
  }
  const size = await historySize(admin, SCHEMA.forge1m);
  const rows = new Map<ForgeSystem, Row>(
    [empty, full].map((s) => [s, { system: s.id, label: s.label, config: "runWorker({ concurrency: 10 }), defaults", samples: {} }]),
  );
  for (let r = 0; r < rounds; r++) {
    process.stdout.write(`  bloat round ${r + 1}:`);
    for (const s of rotate([empty, full], r)) {
      const res = await processingRun(s, "default", 10, n, ctx.sizes.runTimeoutS, admin);
      addSample(rows.get(s)!, "jobs/s", res.rate);
      addCosts(rows.get(s)!, res.costs);
      process.stdout.write(` ${s.id} ${Math.round(res.rate)}`);
    }
    process.stdout.write("\n");
  }
  await empty.close();
  await full.close();
  ctx.publish({
    id: "bloat",
    title: `Claim rate with ${bloatRows.toLocaleString("en-US")} finished jobs kept vs none (${n} jobs, concurrency 10)`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    costColumns: COST_COLUMNS,
    ref: "forge",
    rows: [...rows.values()],
    notes: [
      `÷ ours here = ÷ the empty queue. History with the done rows: ${size} (every partition, heap + indexes), vacuumed before each run (the jobs of earlier runs stay there).`,
    ],
  });
}
