// Point 5 of the reliability issue: stopping a worker process. The process is the CLI itself,
// `forge-jobs worker <handlers>`, run from its source entry (src/cli.ts, the code dist/cli.cjs
// is built from) so the test never runs a stale build. One SIGTERM: in-flight jobs get the
// grace period, the prefetched and the unfinished ones are handed back without using an
// attempt, exit 0. A second SIGTERM: exit at once (130); the lease brings the jobs back.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { drain, enqueue, getJob, reclaim, WORKER_LOST_PREFIX, type Job } from "../../src/index.js";
import { allJobs, backends, waitFor, type TestDatabase } from "../helpers/backends.js";
import { Child, fixture, killAll } from "./helpers/children.js";
import { died, enqueued, finalJobs, historyOf, historyRecorder, reclaimedBy, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";

const CLI = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));
const GRACE = 2;
const LEASE = 2;

describe.each(backends())("SIGTERM on a worker process ($name)", (backend) => {
  let t: TestDatabase;
  const children: Child[] = [];
  beforeAll(async () => (t = await backend.create()));
  afterAll(async () => {
    await killAll(children);
    await t.close();
  });

  function cliWorker(queue: string, grace: number): Child {
    const args = [CLI, "worker", fixture("sigterm-handlers.ts"), "--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])];
    const label = `forge-jobs worker (${queue})`;
    const child = new Child(
      label,
      [...args, "--queue", queue, "--concurrency", "2", "--lease", String(LEASE), "--grace", String(grace), "--poll", "0.1"],
      // The handlers module records its runs' claims as this worker's history.
      { DATABASE_URL: "", FORGE_HISTORY_WORKER: label },
    );
    children.push(child);
    return child;
  }

  const job = async (id: number) => (await getJob(id, { db: t.db })) as Job;
  const work = (queue: string, name: string, ms: number, priority: number, extra: Record<string, unknown> = {}) =>
    enqueue("work", { name, ms, ...extra }, { db: t.db, queue, priority, maxAttempts: 3 });

  it("one SIGTERM: in-flight jobs finish within the grace period, the rest are handed back without using an attempt, exit 0", async () => {
    const queue = "graceful";
    // Concurrency 2 with prefetch 2 claims four: two run (one short, one too long for the
    // grace period), two wait in the buffer. The rest are never claimed.
    const short = await work(queue, "short", 1200, 10);
    const long = await work(queue, "long", 60_000, 10);
    const buffered = [await work(queue, "buffered1", 100, 5), await work(queue, "buffered2", 100, 5)];
    const untouched = [await work(queue, "later1", 100, 0), await work(queue, "later2", 100, 0)];
    const worker = cliWorker(queue, GRACE);
    await worker.waitForMessage("both long and short started", () => worker.count((m) => m.type === "started") === 2);
    await waitFor("the buffered jobs claimed", async () => (await Promise.all(buffered.map(job))).every((j) => j.status === "running"));

    const signalledAt = Date.now();
    worker.kill("SIGTERM");
    // The prefetched jobs come back at once, while the short one is still running.
    await waitFor("the buffered jobs handed back", async () => (await Promise.all(buffered.map(job))).every((j) => j.status === "pending"));
    expect((await job(short)).status).toBe("running");
    const exit = await worker.exited;
    const stoppedIn = Date.now() - signalledAt;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(worker.stderr).toContain("SIGTERM: stopping gracefully");
    expect(stoppedIn).toBeLessThan((GRACE + 3) * 1000);
    expect(stoppedIn).toBeGreaterThanOrEqual(GRACE * 1000 - 200); // it waited for the long one, then gave up

    expect(await job(short)).toMatchObject({ status: "done", attempts: 1, result: { name: "short" }, lastError: null });
    expect(worker.count((m) => m.type === "finished" && m.name === "short")).toBe(1);
    // Unfinished after the grace period, and the prefetched ones: pending again, no attempt used.
    for (const id of [long, ...buffered]) expect(await job(id)).toMatchObject({ status: "pending", attempts: 0, lastError: null });
    for (const id of untouched) expect(await job(id)).toMatchObject({ status: "pending", attempts: 0 });
    expect(worker.count((m) => m.type === "started" && String(m.name).startsWith("buffered"))).toBe(0);
  }, 60_000);

  it("one SIGTERM exits once --grace has passed, even when a handler ignores its abort signal (audit 12.8)", async () => {
    const queue = "deaf";
    const deaf = await work(queue, "deaf", 600_000, 10, { ignoreSignal: true });
    const worker = cliWorker(queue, 1);
    await worker.waitForMessage("the deaf job started", () => worker.count((m) => m.type === "started") === 1);
    worker.kill("SIGTERM");
    // Handed back once the grace period is over: it may run elsewhere, so this process must go.
    const exit = await Promise.race([worker.exited, new Promise<"still running">((r) => setTimeout(() => r("still running"), 20_000))]);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(await job(deaf)).toMatchObject({ status: "pending", attempts: 0 });
  }, 60_000);

  it("a second SIGTERM stops it at once (exit 130); the lease brings its jobs back", async () => {
    const queue = "impatient";
    const running = [await work(queue, "stuck1", 60_000, 10, { ignoreSignal: true }), await work(queue, "stuck2", 60_000, 10, { ignoreSignal: true })];
    const buffered = await work(queue, "buffered", 100, 5);
    const history: HistoryEvent[] = [...running, buffered].map((id) => enqueued(id, "test"));
    const worker = cliWorker(queue, 60); // a grace period far longer than the test
    await worker.waitForMessage("both stuck jobs started", () => worker.count((m) => m.type === "started") === 2);
    await waitFor("the third job claimed", async () => (await job(buffered)).status === "running");
    worker.kill("SIGTERM");
    await waitFor("the buffered job handed back", async () => (await job(buffered)).status === "pending");
    const secondAt = Date.now();
    history.push(died(worker.label)); // it leaves at once: what it had not said is lost with it
    worker.kill("SIGTERM");
    expect(await worker.exited).toEqual({ code: 130, signal: null });
    expect(Date.now() - secondAt).toBeLessThan(2000);
    expect(worker.stderr).toContain("SIGTERM again: stopping now");
    expect(await job(buffered)).toMatchObject({ status: "pending", attempts: 0 });

    // Nobody extends the lease any more: once it has run out, reclaim takes the jobs back, saying why.
    for (const id of running) expect((await job(id)).status).toBe("running");
    const lockedUntil = Math.max(...(await Promise.all(running.map(async (id) => ((await job(id)) as Job & { lockedUntil: Date }).lockedUntil.getTime()))));
    await waitFor("the lease to run out", async () => (await t.now()).getTime() > lockedUntil, (LEASE + 5) * 1000);
    const reclaimed = await reclaim({ db: t.db, queue });
    history.push(...reclaimedBy("test", reclaimed));
    expect(reclaimed.map((j) => j.id).sort((a, b) => a - b)).toEqual(running);
    for (const id of running) {
      const back = await job(id);
      expect(back).toMatchObject({ status: "pending", attempts: 1 });
      expect(back.lastError).toMatch(new RegExp(`^${WORKER_LOST_PREFIX}`));
    }
    // And they run again.
    const again = historyRecorder("drain", (event) => history.push(event));
    expect(await drain(again.wrap({ work: () => "second run" }), { db: t.db, queue, events: again.events })).toBe(3);
    for (const id of running) expect(await job(id)).toMatchObject({ status: "done", attempts: 2, result: "second run" });

    // The history of every run (RELIABILITY.md, "The history checker"): the CLI's handlers module
    // records its runs' claims; the test, its death, the reclaim and the second runs.
    history.push(...historyOf([worker]));
    expect(history.filter((e) => e.kind === "claimed").length).toBe(5);
    const violations = checkHistory(history, await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db), queue));
    expect(violations, describeViolations(violations)).toEqual([]);
  }, 60_000);
});
