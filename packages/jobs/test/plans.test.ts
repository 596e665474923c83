// The hot statements must reach their rows through an index, whatever the table's size. With a
// join (`FROM picked` / `FROM unnest(…)`) alone, PostgreSQL read a table of 20,000 analysed rows
// whole and hash-joined it on every claim, completion and lease extension: 3–4 ms each instead
// of ~1, a quarter of the worker's throughput. This looks at the plans (EXPLAIN, nothing timed)
// of the statements exactly as the queue sends them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueueMany } from "../src/index.js";
import { claimJobs } from "../src/run/claim.js";
import { completeRuns } from "../src/run/complete.js";
import { extendLeases } from "../src/run/lease.js";
import { backends, type Backend, type TestDatabase } from "./helpers/backends.js";

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** A fresh queue with `jobs` pending jobs, analysed; every statement sent afterwards is recorded. */
async function seededQueue(backend: Backend, jobs: number): Promise<{ t: TestDatabase; sent: { sql: string; params: readonly unknown[] }[] }> {
  const t = await backend.create();
  await enqueueMany(
    Array.from({ length: jobs }, (_, i) => ({ task: "plan", payload: { i } })),
    { db: t.db },
  );
  await t.db.executor.query(backend.name === "postgres" ? `ANALYZE ${t.db.table}` : "ANALYZE");
  const sent: { sql: string; params: readonly unknown[] }[] = [];
  const executor = t.db.executor;
  const query = executor.query.bind(executor);
  executor.query = ((sql: string, params?: readonly unknown[], name?: string) => {
    sent.push({ sql, params: params ?? [] });
    return query(sql, params, name);
  }) as typeof executor.query;
  return { t, sent };
}

describe.each(backends().filter((b) => b.name === "postgres"))("query plans of the hot statements ($name)", (backend) => {
  let t: TestDatabase;
  let sent: { sql: string; params: readonly unknown[] }[];

  beforeAll(async () => {
    ({ t, sent } = await seededQueue(backend, 20_000));
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  /** The plan PostgreSQL makes for the last statement sent (EXPLAIN only: nothing runs). */
  async function planOfLast(): Promise<PlanNode[]> {
    const last = sent.at(-1)!;
    const { rows } = await t.db.executor.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${last.sql}`, last.params);
    return nodes(rows[0]!["QUERY PLAN"][0].Plan);
  }

  const seqScansOfJobs = (plan: PlanNode[]) => plan.filter((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "jobs");
  const indexScansOfJobs = (plan: PlanNode[]) => plan.filter((n) => /Index/.test(n["Node Type"]) && n["Relation Name"] === "jobs");

  it("claim, lease extension and completion of 130 jobs in a table of 20,000 use indexes, never a sequential scan of the table", async () => {
    const jobs = (await claimJobs(t.db, { queues: ["default"], limit: 130, start: 130, lease: 30, workerId: "plans" })).jobs;
    expect(jobs).toHaveLength(130);
    const claimPlan = await planOfLast();
    expect(seqScansOfJobs(claimPlan)).toEqual([]);
    expect(indexScansOfJobs(claimPlan).length).toBeGreaterThanOrEqual(2); // the pending walk, then the rows by id

    // Several queues: one walk per queue (LATERAL), then the rows by id.
    const more = (await claimJobs(t.db, { queues: ["default", "other"], limit: 10, start: 10, lease: 30, workerId: "plans" })).jobs;
    expect(more).toHaveLength(10);
    const multiPlan = await planOfLast();
    expect(seqScansOfJobs(multiPlan)).toEqual([]);
    expect(indexScansOfJobs(multiPlan).length).toBeGreaterThanOrEqual(2);
    await completeRuns(
      t.db,
      more.map((j) => ({ id: j.id, token: j.token, result: null })),
    );

    const claims = jobs.map((j) => ({ id: j.id, token: j.token }));
    expect((await extendLeases(t.db, claims, 30)).size).toBe(130);
    const extendPlan = await planOfLast();
    expect(seqScansOfJobs(extendPlan)).toEqual([]);
    expect(indexScansOfJobs(extendPlan).length).toBeGreaterThanOrEqual(1);

    expect(
      (
        await completeRuns(
          t.db,
          jobs.map((j) => ({ id: j.id, token: j.token, result: null })),
        )
      ).size,
    ).toBe(130);
    const completePlan = await planOfLast();
    expect(seqScansOfJobs(completePlan)).toEqual([]);
    expect(indexScansOfJobs(completePlan).length).toBeGreaterThanOrEqual(1);
  });
});

// The plan PostgreSQL keeps for a prepared statement after five runs is generic: it does not see
// the batch's size, and on a fresh table (no statistics yet) it guesses. The completion with
// `j.id = ANY($1)` beside its guard on dependents and batches was guessed at one row and joined
// to the unnest in a nested loop that rescanned the whole unnest per row: 1,000 completions
// made a million comparisons (190 ms a batch; processing fell to a third).
describe.each(backends().filter((b) => b.name === "postgres"))("the generic plan of the completion on a fresh table ($name)", (backend) => {
  it("never rescans the batch (the unnest) inside a nested loop", async () => {
    // No ANALYZE: what a new queue's first minutes run with.
    const t = await backend.create();
    const sent: { sql: string }[] = [];
    const query = t.db.executor.query.bind(t.db.executor);
    t.db.executor.query = ((sql: string, params?: readonly unknown[], name?: string) => {
      sent.push({ sql });
      return query(sql, params, name);
    }) as typeof t.db.executor.query;
    try {
      await enqueueMany(
        Array.from({ length: 2000 }, (_, i) => ({ task: "plan", payload: { i } })),
        { db: t.db },
      );
      const jobs = (await claimJobs(t.db, { queues: ["default"], limit: 1000, start: 1000, lease: 30, workerId: "plans" })).jobs;
      expect(jobs).toHaveLength(1000);
      await completeRuns(
        t.db,
        jobs.map((j) => ({ id: j.id, token: j.token, result: null })),
      );
      const completion = sent.filter((q) => /'done' AS status/.test(q.sql)).at(-1)!;
      const plan = await t.db.executor.transaction(async (tx) => {
        await tx.query("SET LOCAL plan_cache_mode = force_generic_plan");
        await tx.query(`PREPARE forge_complete_plan (bigint[], uuid[], text[]) AS ${completion.sql}`);
        try {
          const { rows } = await tx.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
            `EXPLAIN (FORMAT JSON) EXECUTE forge_complete_plan ('{1,2,3}', '{${Array(3).fill("00000000-0000-0000-0000-000000000000").join(",")}}', '{null,null,null}')`,
          );
          return nodes(rows[0]!["QUERY PLAN"][0].Plan);
        } finally {
          await tx.query("DEALLOCATE forge_complete_plan");
        }
      });
      const rescanned = plan.filter((n) => n["Node Type"] === "Nested Loop" && n.Plans?.[1]?.["Node Type"] === "Function Scan");
      expect(rescanned, JSON.stringify(plan.map((n) => n["Node Type"]))).toEqual([]);
    } finally {
      await t.close();
    }
  });
});

// SQLite: the completion read its three arrays with three json_each joined on their keys, a
// nested loop (1,000 completions: 89 ms; the worker stuck at ~9k jobs/s at any concurrency).
// Now one json_each, and each row found by its id.
describe.each(backends().filter((b) => b.name === "sqlite"))("query plans of the hot statements ($name)", (backend) => {
  let t: TestDatabase;
  let sent: { sql: string; params: readonly unknown[] }[];

  beforeAll(async () => {
    ({ t, sent } = await seededQueue(backend, 2_000));
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  it("completing 500 jobs reads the batch once and finds each job by its id", async () => {
    const jobs = (await claimJobs(t.db, { queues: ["default"], limit: 500, start: 500, lease: 30, workerId: "plans" })).jobs;
    expect(jobs).toHaveLength(500);
    expect(
      (
        await completeRuns(
          t.db,
          jobs.map((j) => ({ id: j.id, token: j.token, result: null })),
        )
      ).size,
    ).toBe(500);
    // SQLite's completion is two statements in one transaction: the copy into history, then the delete.
    const completion = sent.slice(-2);
    expect(completion.map((s) => s.sql.trim().split(/\s/)[0])).toEqual(["INSERT", "DELETE"]);
    for (const statement of completion) {
      const { rows } = await t.db.executor.query<{ detail: string }>(`EXPLAIN QUERY PLAN ${statement.sql}`, statement.params);
      const details = rows.map((r) => r.detail);
      // One scan of a json_each (a virtual table), the jobs table only searched by key.
      expect(details.filter((d) => /VIRTUAL TABLE/.test(d))).toHaveLength(1);
      expect(details.filter((d) => /SCAN j\b|SCAN "?jobs"?/.test(d))).toEqual([]);
      expect(details.some((d) => /SEARCH j USING INTEGER PRIMARY KEY/.test(d))).toBe(true);
    }
  });
});
