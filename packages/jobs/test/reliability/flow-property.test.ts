// Flow control under faults, as a property: random enqueues, concurrent claims, completions,
// failures, workers that vanish (their runs abandoned, nothing written), forced takeovers and
// limits changed at run time. Checked from the database after every step: no claim ever brings
// a key above its limit (a lowered limit pre-empts nothing, so a key may stay above a new,
// lower limit until its runs end, never climb), and in the end every job ends.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimJobs, type ClaimedJob } from "../../src/run/claim.js";
import { completeRuns } from "../../src/run/complete.js";
import { failJob } from "../../src/run/fail.js";
import { enqueueMany, reclaim } from "../../src/index.js";
import { backends, uniqueName, type TestDatabase } from "../helpers/backends.js";

const KEYS = ["a", "b", "c"] as const;
const GROUPS = ["g1", "g2", ""] as const;

type Step =
  | { kind: "enqueue"; count: number; key: number; group: number }
  | { kind: "claim"; workers: number; slots: number }
  | { kind: "complete"; pick: number }
  | { kind: "fail"; pick: number }
  | { kind: "kill"; pick: number }
  | { kind: "takeover" }
  | { kind: "limit"; key: number; concurrency: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant("enqueue" as const),
    count: fc.integer({ min: 1, max: 6 }),
    key: fc.integer({ min: 0, max: 3 }),
    group: fc.integer({ min: 0, max: 2 }),
  }),
  fc.record({ kind: fc.constant("claim" as const), workers: fc.integer({ min: 1, max: 4 }), slots: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ kind: fc.constant("complete" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("fail" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("kill" as const), pick: fc.nat() }),
  fc.constant({ kind: "takeover" as const }),
  fc.record({ kind: fc.constant("limit" as const), key: fc.integer({ min: 0, max: 2 }), concurrency: fc.integer({ min: 0, max: 3 }) }),
);

describe.each(backends())("flow control under faults, a property ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("no key ever exceeds its limit, and every job ends", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 30 }), async (steps) => {
        const queue = uniqueName("prop");
        const key = (i: number) => `${queue}:${KEYS[i] ?? "free"}`;
        const limits = new Map<string, number>();
        const setLimit = async (k: string, concurrency: number) => {
          await t.sql(`DELETE FROM ${t.db.limitsTable} WHERE limit_key = $1`, [k]);
          await t.sql(`INSERT INTO ${t.db.limitsTable} (limit_key, concurrency) VALUES ($1, $2)`, [k, concurrency]);
          limits.set(k, concurrency);
        };
        for (let i = 0; i < KEYS.length; i++) await setLimit(key(i), 2);
        const running = async () => {
          const rows = await t.sql<{ k: string; n: number | string }>(
            `SELECT concurrency_key AS k, count(*) AS n FROM {jobs} WHERE queue = $1 AND status = 'running' GROUP BY concurrency_key`,
            [queue],
          );
          return new Map(rows.map((r) => [String(r.k), Number(r.n)]));
        };
        let held: ClaimedJob[] = [];
        const take = (pick: number) => (held.length === 0 ? null : (held.splice(pick % held.length, 1)[0] as ClaimedJob));
        for (const s of steps) {
          if (s.kind === "enqueue") {
            await enqueueMany(
              Array.from({ length: s.count }, () => ({ task: "t", concurrencyKey: s.key === 3 ? "" : key(s.key), group: GROUPS[s.group], maxAttempts: 3 })),
              { db: t.db, queue },
            );
          } else if (s.kind === "claim") {
            const before = await running();
            // Workers claim at once, on their own connections where the backend has several.
            const claims = await Promise.all(
              Array.from({ length: s.workers }, (_, w) => claimJobs(t.db, { queues: [queue], limit: s.slots, start: s.slots, lease: 60, workerId: `w${w}` })),
            );
            held.push(...claims.flatMap((c) => c.jobs));
            const after = await running();
            for (const [k, n] of after) {
              const limit = limits.get(k);
              if (limit !== undefined) expect(n, `key ${k} after a claim`).toBeLessThanOrEqual(Math.max(limit, before.get(k) ?? 0));
            }
          } else if (s.kind === "complete") {
            const run = take(s.pick);
            if (run) await completeRuns(t.db, [{ id: run.id, token: run.token, result: null }]);
          } else if (s.kind === "fail") {
            const run = take(s.pick);
            if (run) await failJob(t.db, run.id, run.token, { kind: "retry", delay: 0 }, "boom");
          } else if (s.kind === "kill") {
            take(s.pick); // the worker vanished: nothing is written, the lease will tell
          } else if (s.kind === "takeover") {
            await reclaim({ db: t.db, queue, lease: 0 });
            held = []; // every run's token is stale now
          } else {
            await setLimit(key(s.key), s.concurrency);
          }
        }
        // The end: limits lifted, abandoned runs taken back, everything run to its end.
        for (let i = 0; i < KEYS.length; i++) await setLimit(key(i), 5);
        for (let round = 0; round < 200; round++) {
          await reclaim({ db: t.db, queue, lease: 0 });
          const { jobs } = await claimJobs(t.db, { queues: [queue], limit: 50, start: 50, lease: 60, workerId: "finisher" });
          if (jobs.length === 0) break;
          await completeRuns(
            t.db,
            jobs.map((j) => ({ id: j.id, token: j.token, result: null })),
          );
        }
        const left = await t.sql<{ status: string; n: number | string }>(`SELECT status, count(*) AS n FROM {all} WHERE queue = $1 GROUP BY status`, [queue]);
        for (const row of left) expect(["done", "failed"], `${String(row.n)} jobs ${row.status}`).toContain(row.status);
      }),
      { numRuns: 12 },
    );
  }, 180_000);
});
