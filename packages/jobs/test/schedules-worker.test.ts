import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorker, JobError, schedule, unschedule, type JobContext } from "../src/index.js";
import { schedulerPass } from "../src/schedules/scheduler.js";
import { backends, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("workers run the scheduler ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("a worker enqueues a schedule's due run and runs it, with ctx.scheduledAt its slot", async () => {
    await schedule("heartbeat", "* * * * * *", { task: "beat", queue: "scheduled", overlap: "allow", db: t.db });
    const seen: Date[] = [];
    const worker = createWorker(
      { beat: (_p: unknown, ctx: JobContext) => void seen.push(ctx.scheduledAt!) },
      { db: t.db, queue: "scheduled", pollInterval: 0.05 },
    );
    const running = worker.run();
    try {
      await waitFor("a scheduled run", async () => seen.length > 0);
    } finally {
      await unschedule("heartbeat", { db: t.db });
      await worker.stop();
      await running;
    }
    expect(seen[0]).toBeInstanceOf(Date);
    expect(seen[0]!.getUTCMilliseconds()).toBe(0);
    const [row] = await t.sql<{ k: string }>("SELECT idempotency_key AS k FROM {all} WHERE task = 'beat' AND status = 'done' ORDER BY id LIMIT 1");
    expect(row!.k).toBe(`schedule:heartbeat@${seen[0]!.toISOString()}`);
  });

  it("on a schema without the schedules table, a worker's pass says so once and stands by", async () => {
    const own = await backend.create();
    try {
      await own.sql(`DROP TABLE ${own.db.schedulesTable}`);
      const warnings: string[] = [];
      const log = () => undefined;
      const pass = schedulerPass(own.db, 1000, { debug: log, info: log, error: log, warn: (_o: object, msg?: string) => void warnings.push(msg ?? "") });
      await pass();
      await pass();
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/no schedules table yet \(run forge-jobs migrate/);
    } finally {
      await own.close();
    }
  });

  it("refuses a schedules option that is not a boolean", () => {
    expect(() => createWorker({}, { db: t.db, schedules: "no" as never })).toThrow(JobError);
    expect(() => createWorker({}, { db: t.db, schedules: false })).not.toThrow();
  });
});
