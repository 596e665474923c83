// What the dashboard's home page and `forge-jobs status` read, with many finished jobs in the
// table (issue 17.4). With 10,000,000 done rows and nothing pending or failed, the page's
// pending and failed lists walked the primary key backwards through the whole table, and the
// groups' and keys' counts (status and the page) read every row: about 1 s each. Here: the
// lists are right on every backend (the pending one merges its two branches), and on
// PostgreSQL no statement of the page or of status reads the jobs table whole. Since ended jobs
// move to history (issue 33), the finished rows are in history's day partitions, and in the live
// table those of a database not yet upgraded: no statement reads either whole.
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDashboard } from "../../src/dashboard/index.js";
import { latestJobs } from "../../src/dashboard/queries.js";
import { flowOverview } from "../../src/flow/flow-overview.js";
import { enqueue, setGroupWeight, setLimit, statusCounts } from "../../src/index.js";
import type { Executor } from "../../src/db/executor.js";
import { ensureDays } from "../../src/maintenance/history.js";
import { STORED_LIST } from "../../src/run/ended.js";
import { backends, type TestDatabase } from "../helpers/backends.js";

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}

/** A plan node that reads `relation` whole: a sequential scan, or an index walked with no condition. */
const readsWhole = (n: PlanNode, relation: string) =>
  n["Relation Name"] === relation && (n["Node Type"] === "Seq Scan" || (/^Index (Only )?Scan$/.test(n["Node Type"]) && n["Index Cond"] === undefined));

const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

describe.each(backends())("the page's lists with finished jobs in the table ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await backend.create();
  });
  afterAll(async () => {
    await t?.close();
  });

  it("lists the newest pending jobs of both kinds (plain, grouped or keyed) merged by id, and the failed ones", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) {
      const options = i % 3 === 0 ? { group: "g" } : i % 3 === 1 ? { concurrencyKey: "k" } : {};
      ids.push(await enqueue("list", { i }, { db: t.db, ...options }));
    }
    await t.sql(`UPDATE ${t.db.table} SET status = 'failed', finished_at = run_at WHERE id = $1 OR id = $2`, [ids[1], ids[4]]);
    const pending = await latestJobs(t.db, "pending", 3);
    expect(pending.map((j) => j.id)).toEqual([ids[5], ids[3], ids[2]]);
    expect((await latestJobs(t.db, "failed", 20)).map((j) => j.id)).toEqual([ids[4], ids[1]]);
    expect(await latestJobs(t.db, "running", 20)).toEqual([]);
  });
});

describe.each(backends().filter((b) => b.name === "postgres"))("the page's and status's statements on a table of finished jobs ($name)", (backend) => {
  let t: TestDatabase;
  let server: Server;
  let url: string;
  const sent: { sql: string; params: readonly unknown[] }[] = [];
  /** History's partitions that hold rows. */
  let holding: string[] = [];

  beforeAll(async () => {
    t = await backend.create();
    // 20,000 done jobs in history (yesterday's partition) and 20,000 more still in the live table
    // (a database not yet upgraded), and nothing else: no pending, running or failed row for a
    // list to stop at.
    const finished = () =>
      t.sql(
        `INSERT INTO ${t.db.table} (queue, task, status, attempts, run_at, started_at, finished_at)
         SELECT 'default', 'old', 'done', 1, now() - interval '1 day', now() - interval '1 day', now() - interval '1 day' FROM generate_series(1, 20000)`,
      );
    await ensureDays(t.db, -1, 1);
    await finished();
    await t.sql(`WITH gone AS (DELETE FROM {jobs} RETURNING ${STORED_LIST}) INSERT INTO {history} (${STORED_LIST}) SELECT ${STORED_LIST} FROM gone`);
    await finished();
    holding = (await t.sql<{ name: string }>("SELECT DISTINCT c.relname AS name FROM {history} h JOIN pg_class c ON c.oid = h.tableoid")).map((r) => r.name);
    expect(holding).toHaveLength(1);
    // A limit and a group, so that status reads the keys' and the groups' counts.
    await setLimit("k", { concurrency: 1 }, { db: t.db });
    await setGroupWeight("g", 2, { db: t.db });
    await t.sql(`ANALYZE ${t.db.table}`);
    await t.sql(`ANALYZE ${t.db.historyTable}`);
    const record = (executor: Executor) => {
      const query = executor.query.bind(executor);
      executor.query = ((sql: string, params?: readonly unknown[], name?: string) => {
        sent.push({ sql, params: params ?? [] });
        return query(sql, params, name);
      }) as typeof executor.query;
    };
    record(t.db.executor);
    const transaction = t.db.executor.transaction.bind(t.db.executor);
    t.db.executor.transaction = ((fn: (tx: Executor) => Promise<unknown>, options?: object) =>
      transaction((tx) => {
        if (tx !== t.db.executor) record(tx);
        return fn(tx);
      }, options)) as typeof t.db.executor.transaction;
    const handler = createDashboard({ db: t.db, basePath: "/" });
    server = createServer((req, res) => handler(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
  }, 60_000);
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await t?.close();
  });

  it("reads the jobs table and history's partitions through indexes only: no sequential scan, no walk of the primary key or of a partition's index", async () => {
    const page = await fetch(url);
    expect(page.status).toBe(200);
    await page.text();
    await statusCounts({ db: t.db });
    await flowOverview(t.db);
    const reads = [
      ...new Map(
        sent
          .filter((s) => /^\s*SELECT/i.test(s.sql) && (s.sql.includes(t.db.table) || s.sql.includes(t.db.historyTable)))
          .map((s) => [s.sql + JSON.stringify(s.params), s]),
      ).values(),
    ];
    expect(reads.length).toBeGreaterThanOrEqual(10);
    expect(reads.some((s) => /GROUP BY group_key/.test(s.sql))).toBe(true);
    expect(reads.some((s) => /GROUP BY concurrency_key/.test(s.sql))).toBe(true);
    for (const { sql, params } of reads) {
      const { rows } = await t.db.executor.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${sql}`, params);
      const plan = nodes(rows[0]!["QUERY PLAN"][0].Plan);
      const whole = plan.filter(
        (n) =>
          (n["Node Type"] === "Seq Scan" && n["Relation Name"] === "jobs") ||
          (n["Index Name"] === "jobs_pkey" && n["Index Cond"] === undefined) ||
          holding.some((partition) => readsWhole(n, partition)),
      );
      expect(whole, `${sql}\n${JSON.stringify(plan.map((n) => [n["Node Type"], n["Index Name"]]))}`).toEqual([]);
    }
  });
});
