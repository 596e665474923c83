import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schedule } from "../../src/index.js";
import { timestampParam } from "../../src/schedules/schedule-rows.js";
import { backends, type TestDatabase } from "../helpers/backends.js";

const run = promisify(execFile);
const tsx = createRequire(import.meta.url).resolve("tsx");
const script = fileURLToPath(new URL("../fixtures/scheduler-day.ts", import.meta.url));
const DAY = "2027-08-01T00:00:00.000Z";
const MINUTES = 1440;

describe.each(backends())("4 scheduler processes, one simulated day of minute slots ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("enqueue exactly one job per slot", async () => {
    // Default policy (catch-up "last", overlap "skip" is what most schedules use) would hold
    // slots back behind pending runs; "allow" makes every slot's job visible to count.
    await schedule("every-minute", "* * * * *", { task: "tick", overlap: "allow", db: t.db });
    await t.sql(`UPDATE ${t.db.schedulesTable} SET next_run_at = $1 WHERE name = 'every-minute'`, [timestampParam(t.db, new Date(DAY))]);
    const results = await Promise.all(
      Array.from({ length: 4 }, () => run(process.execPath, ["--import", tsx, script, t.url, t.schema ?? "", DAY, String(MINUTES)], { timeout: 240_000 })),
    );
    expect(results.map((r) => r.stderr)).toEqual(["", "", "", ""]);
    const handed = results.map((r) => (JSON.parse(r.stdout) as { handed: number }).handed);
    const rows = await t.sql<{ k: string }>("SELECT idempotency_key AS k FROM {all} WHERE task = 'tick' ORDER BY idempotency_key");
    const expected = Array.from({ length: MINUTES }, (_, m) => `schedule:every-minute@${new Date(Date.parse(DAY) + m * 60_000).toISOString()}`);
    expect(rows.map((r) => r.k)).toEqual(expected);
    // Every process did take part (each handed some slots on; the database kept one job of each).
    expect(handed.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(MINUTES);
  }, 300_000);
});
