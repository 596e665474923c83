// A silent network cut between one worker and the database (a TCP proxy that stops every
// byte without closing anything). An enqueue through the cut fails within the connect timeout
// instead of hanging; the cut-off worker's jobs are taken over by a worker on a healthy path
// once their lease runs out; when the network comes back, the cut-off worker's late writes are
// refused, it reconnects by itself and works again. SQLite has no network: not run there.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, enqueue, enqueueMany, getJob, WORKER_LOST_PREFIX } from "../../src/index.js";
import { allJobs, backends, waitFor, type TestDatabase } from "../helpers/backends.js";
import { effectTables } from "./helpers/effects.js";
import { Fleet } from "./helpers/fleet.js";
import { hostAndPort, startProxy, viaProxy, type Proxy } from "./helpers/proxy.js";
import { enqueued, finalJobs, historyOf } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { count, finished } from "./helpers/queue.js";

/** What the queue's own pools allow for a new connection (pg: connectionTimeoutMillis; mysql2: connectTimeout). */
const CONNECT_TIMEOUT_S = 10;
const DEFAULT_PORTS = { postgres: 5432, mysql: 3306, sqlite: 0 };

const served = backends().filter((b) => b.name !== "sqlite");
// A file with no suite fails the run: without a server backend (FORGE_TEST_BACKENDS=sqlite), say why it is empty.
describe.skipIf(served.length > 0)("a silent network cut", () => it.skip("needs PostgreSQL or MariaDB (FORGE_TEST_BACKENDS)", () => undefined));

describe.each(served)("a silent network cut ($name)", (backend) => {
  let t: TestDatabase;
  let proxy: Proxy;
  let tables: { effects: string; first: string };
  const fleets: Fleet[] = [];

  beforeAll(async () => {
    t = await backend.create();
    proxy = await startProxy(hostAndPort(t.url, DEFAULT_PORTS[backend.name]));
    tables = await effectTables(t);
  });
  afterAll(async () => {
    for (const fleet of fleets) await fleet.kill();
    await proxy?.close();
    await t.close();
  });

  it("enqueue through the cut fails fast; the cut-off worker's jobs move to a healthy one; it comes back when the network does", async () => {
    const queue = "partition";
    const worker = (url: string, prefix: string) => {
      const fleet = new Fleet(
        {
          url,
          schema: t.schema,
          queue,
          concurrency: 3,
          lease: 2,
          sweepInterval: 0.5,
          pollInterval: 0.2,
          poolSize: 4,
          tables,
          history: true,
        },
        1,
        { prefix },
      );
      fleets.push(fleet);
      return fleet;
    };
    const cutOff = worker(viaProxy(t.url, proxy), "behind-the-cut");
    await cutOff.started();
    const [far] = cutOff.slots;
    const ids = await enqueueMany(
      Array.from({ length: 30 }, () => ({ task: "effect", payload: { ms: 600 }, maxAttempts: 5 })),
      { db: t.db, queue },
    );
    await waitFor(
      "the worker behind the proxy running jobs",
      async () => (await count(t, `SELECT count(*) AS n FROM ${tables.effects} WHERE worker = $1`, [far!.label])) > 0,
    );

    proxy.cut();
    const held = (await t.sql<{ id: number | string }>(`SELECT id FROM {jobs} WHERE status = 'running' AND locked_by = $1`, [far!.label])).map((r) =>
      Number(r.id),
    );
    const started = (await t.sql<{ job_id: number | string }>(`SELECT job_id FROM ${tables.effects} WHERE worker = $1`, [far!.label])).map((r) =>
      Number(r.job_id),
    );
    const healthy = worker(t.url, "healthy");

    // An enqueue through the cut, on a new connection: a clear error within the connect timeout, not a hang.
    const through = connect(viaProxy(t.url, proxy), t.schema ? { schema: t.schema } : {});
    const tried = Date.now();
    const outcome = await Promise.race([
      enqueue("effect", { ms: 1 }, { db: through, queue, idempotencyKey: "through-the-cut" }).then(
        (id) => ({ id }),
        (error: Error) => ({ error }),
      ),
      new Promise<{ hung: true }>((r) => setTimeout(() => r({ hung: true }), 3 * CONNECT_TIMEOUT_S * 1000).unref()),
    ]);
    expect(outcome).toHaveProperty("error");
    expect(Date.now() - tried).toBeLessThan((CONNECT_TIMEOUT_S + 3) * 1000);
    expect((outcome as { error: Error }).error.message).toMatch(/timeout|timed out|ETIMEDOUT/i);
    void through.close().catch(() => undefined); // its connection attempt is still stuck in the proxy

    // Meanwhile the healthy worker took over every job the cut-off one held, and finished them all.
    await waitFor("every job done by the healthy worker", async () => (await finished(t, queue)) === ids.length, 30_000, 100);
    for (const id of held) {
      const job = await getJob(id, { db: t.db });
      expect(job).toMatchObject({ status: "done", result: { worker: healthy.slots[0]!.label } });
      // A job it had started gets the lost-worker verdict; one it held unstarted in its buffer
      // comes back with none and no attempt used (a start write in flight at the cut may land).
      if (started.includes(id) || job!.lastError !== null)
        expect(job!.lastError).toMatch(new RegExp(`^${WORKER_LOST_PREFIX}: attempt \\d of 5 held by behind-the-cut`));
      else expect(job).toMatchObject({ attempts: 1 });
    }
    expect(await count(t, "SELECT count(*) AS n FROM {all} WHERE idempotency_key = 'through-the-cut'")).toBe(0);

    // The network comes back (the old connections are gone): the cut-off worker's late writes
    // about the jobs it was running are refused, and it reconnects by itself.
    proxy.heal("reset");
    const healedAt = Date.now();
    await far!.waitForMessage(
      "its late writes refused",
      () => started.every((id) => far!.messages.some((m) => m.type === "job:fenced" && m.job === id)),
      20_000,
    );
    expect((await healthy.stop()).map((e) => e.code)).toEqual([0]);
    const after = await enqueueMany(
      Array.from({ length: 5 }, () => ({ task: "effect", payload: { ms: 10 } })),
      { db: t.db, queue },
    );
    await waitFor("the reconnected worker doing new jobs", async () => (await finished(t, queue)) === ids.length + after.length, 30_000, 100);
    for (const id of after) expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: { worker: far!.label } });
    far!.assertRunning();
    expect((await cutOff.stop()).map((e) => e.code)).toEqual([0]);

    // The history of every run, judged against the table (RELIABILITY.md, "The history checker").
    // A start write stuck in the cut may never land: its run's attempt can go uncounted.
    const history = [...[...ids, ...after].map((id) => enqueued(id, "test")), ...historyOf([...cutOff.all, ...healthy.all])];
    const violations = checkHistory(history, await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db)), { uncountedStartsBefore: healedAt });
    expect(violations, describeViolations(violations)).toEqual([]);
  }, 90_000);
});
