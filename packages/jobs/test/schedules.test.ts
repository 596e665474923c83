import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  enqueue,
  JobError,
  listSchedules,
  pauseSchedule,
  processOne,
  resumeSchedule,
  schedule,
  syncSchedules,
  triggerSchedule,
  unschedule,
  type JobContext,
} from "../src/index.js";
import { cronSlots } from "../src/schedules/cron-slots.js";
import { runDueSchedules, runSchedule, slotsToRun } from "../src/schedules/scheduler.js";
import { readSchedule } from "../src/schedules/schedules.js";
import { silentLogger } from "../src/base/logger.js";
import { timestampParam } from "../src/schedules/schedule-rows.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Collects what a logger is told. */
function recordingLogger() {
  const lines: { obj: Record<string, unknown>; msg?: string }[] = [];
  const log = (obj: object, msg?: string) => void lines.push({ obj: obj as Record<string, unknown>, msg });
  return { lines, logger: { debug: log, info: log, warn: log, error: log } };
}

describe.each(backends())("schedules ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());
  // Each test's simulated clock would find the others' schedules due too: one test, its own schedules.
  afterEach(async () => {
    for (const s of await listSchedules({ db: t.db })) await unschedule(s.name, { db: t.db });
  });

  /** The slots a schedule's jobs were enqueued for, from their idempotency keys, oldest first. */
  async function slotsOf(name: string, status?: string): Promise<string[]> {
    const rows = await t.sql<{ k: string }>(
      `SELECT idempotency_key AS k FROM {all} WHERE idempotency_key LIKE $1${status ? ` AND status = '${status}'` : ""} ORDER BY idempotency_key`,
      [`schedule:${name}@%`],
    );
    return rows.map((r) => r.k.slice(r.k.lastIndexOf("@") + 1));
  }

  /** Puts a schedule's next slot at its first slot at or after `from`: where a test's simulated day starts. */
  async function startAt(name: string, from: string): Promise<void> {
    const row = (await listSchedules({ db: t.db })).find((s) => s.name === name)!;
    const next = cronSlots(row.cron, row.timezone).nextAfter(new Date(Date.parse(from) - 1))!;
    await t.sql(`UPDATE ${t.db.schedulesTable} SET next_run_at = $1 WHERE name = $2`, [timestampParam(t.db, next), name]);
  }

  /** Scheduler passes at `from`, then every `stepMs` until `to`, as a scheduler polling would make them. */
  async function passes(from: string, to: string, stepMs: number): Promise<void> {
    for (let now = new Date(from).getTime(); now <= new Date(to).getTime(); now += stepMs) {
      await runDueSchedules(t.db, { now: new Date(now), onTimeMs: stepMs });
    }
  }

  it("declaring is idempotent: the same definition changes nothing, a changed one is stored and logged", async () => {
    const { lines, logger } = recordingLogger();
    expect(await schedule("idem", "0 3 * * *", { task: "report", payload: { kind: "daily" }, db: t.db, logger })).toBe("created");
    const before = (await listSchedules({ db: t.db })).find((s) => s.name === "idem")!;
    expect(before).toMatchObject({ cron: "0 3 * * *", timezone: "UTC", task: "report", queue: "default", lastRunAt: null, paused: false });
    expect(before.nextRunAt!.getUTCHours()).toBe(3);

    expect(await schedule("idem", "0 3 * * *", { task: "report", payload: { kind: "daily" }, db: t.db, logger })).toBe("unchanged");
    expect(lines.filter((l) => l.msg === "schedule updated")).toEqual([]);

    expect(await schedule("idem", "30 4 * * *", { task: "report", payload: { kind: "daily" }, timezone: "Europe/Paris", db: t.db, logger })).toBe("updated");
    const updated = lines.find((l) => l.msg === "schedule updated")!;
    expect(updated.obj).toMatchObject({ schedule: "idem", changed: ["cron", "timezone"], cron: "30 4 * * *", was: { cron: "0 3 * * *" } });
    const after = (await listSchedules({ db: t.db })).find((s) => s.name === "idem")!;
    expect(after).toMatchObject({ cron: "30 4 * * *", timezone: "Europe/Paris" });
    // 04:30 in Paris is 02:30 or 03:30 UTC: the next slot moved with the cron.
    expect([2, 3]).toContain(after.nextRunAt!.getUTCHours());
    expect(after.nextRunAt!.getUTCMinutes()).toBe(30);
  });

  it("refuses a bad definition with a JobError and writes nothing", async () => {
    const bad: [string, string, Record<string, unknown>, string][] = [
      ["bad-cron", "61 * * * *", { task: "t" }, "cron"],
      ["bad-cron", "* * * * * * *", { task: "t" }, "cron"],
      ["bad-zone", "@daily", { task: "t", timezone: "Mars/Olympus" }, "timezone"],
      ["bad-catchup", "@daily", { task: "t", catchUp: "some" }, "catchUp"],
      ["bad-overlap", "@daily", { task: "t", overlap: "never" }, "overlap"],
      ["bad-limit", "@daily", { task: "t", catchUp: "all", catchUpLimit: 0 }, "catchUpLimit"],
      ["bad-option", "@daily", { task: "t", timeZone: "UTC" }, "timeZone"],
      ["no-task", "@daily", {}, "task"],
    ];
    for (const [name, cron, options, field] of bad) {
      const error = await schedule(name, cron, { ...options, db: t.db } as never).catch((e: unknown) => e);
      expect(error, `${name} ${cron}`).toBeInstanceOf(JobError);
      expect((error as JobError).field).toBe(field);
    }
    const huge = { text: "x".repeat(t.db.settings.maxPayloadBytes) };
    await expect(schedule("bad-payload", "@daily", { task: "t", payload: huge, db: t.db })).rejects.toThrow(/payload is \d+ bytes of JSON; the limit is/);
    await expect(syncSchedules([{ name: "bad-sync", cron: "@daily", task: "t", payload: huge }], { db: t.db })).rejects.toBeInstanceOf(JobError);
    expect((await listSchedules({ db: t.db })).filter((s) => s.name.startsWith("bad-") || s.name === "no-task")).toEqual([]);
  });

  it("takes five fields, six with seconds, and nicknames", async () => {
    await schedule("five", "*/5 * * * *", { task: "t", db: t.db });
    await schedule("six", "*/10 * * * * *", { task: "t", db: t.db });
    await schedule("nick", "@hourly", { task: "t", db: t.db });
    const next = Object.fromEntries((await listSchedules({ db: t.db })).map((s) => [s.name, s.nextRunAt!]));
    expect(next.five!.getUTCMinutes() % 5).toBe(0);
    expect(next.six!.getUTCSeconds() % 10).toBe(0);
    expect([next.nick!.getUTCMinutes(), next.nick!.getUTCSeconds()]).toEqual([0, 0]);
    for (const name of ["five", "six", "nick"]) await unschedule(name, { db: t.db });
  });

  it("syncSchedules removes the code-declared schedules no longer declared (and their pending runs), never those made by schedule()", async () => {
    expect(
      await syncSchedules(
        [
          { name: "sync-a", cron: "0 * * * *", task: "a", overlap: "allow" },
          { name: "sync-b", cron: "0 * * * *", task: "b", overlap: "allow" },
        ],
        { db: t.db },
      ),
    ).toEqual({ "sync-a": "created", "sync-b": "created" });
    await schedule("by-hand", "0 * * * *", { task: "h", db: t.db });
    await startAt("sync-b", "2027-01-01T00:00:00Z");
    await runDueSchedules(t.db, { now: new Date("2027-01-01T00:00:10Z") });
    expect(await slotsOf("sync-b", "pending")).toEqual(["2027-01-01T00:00:00.000Z"]);

    expect(await syncSchedules([{ name: "sync-a", cron: "0 * * * *", task: "a", overlap: "allow" }], { db: t.db })).toEqual({
      "sync-a": "unchanged",
      "sync-b": "removed",
    });
    const names = (await listSchedules({ db: t.db })).map((s) => s.name);
    expect(names).toContain("sync-a");
    expect(names).toContain("by-hand");
    expect(names).not.toContain("sync-b");
    expect(await slotsOf("sync-b", "pending")).toEqual([]);
    expect(await slotsOf("sync-b", "cancelled")).toEqual(["2027-01-01T00:00:00.000Z"]);
    await expect(
      syncSchedules(
        [
          { name: "x", cron: "@daily", task: "t" },
          { name: "x", cron: "@daily", task: "t" },
        ],
        { db: t.db },
      ),
    ).rejects.toThrow(/declared twice/);
  });

  it("racing scheduler passes enqueue each slot once", async () => {
    await schedule("race", "* * * * *", { task: "tick", overlap: "allow", catchUp: "all", db: t.db });
    await startAt("race", "2027-02-01T00:00:00Z");
    for (let minute = 0; minute < 30; minute++) {
      const now = new Date(Date.parse("2027-02-01T00:00:00Z") + minute * MINUTE + 500);
      await Promise.all(Array.from({ length: 4 }, () => runDueSchedules(t.db, { now })));
    }
    const slots = await slotsOf("race");
    expect(slots).toHaveLength(30);
    expect(new Set(slots).size).toBe(30);
  });

  it("a slot handed out again (its schedule moved back, as a stale writer would) still has one job: the unique slot key", async () => {
    await schedule("again", "* * * * *", { task: "tick", overlap: "allow", db: t.db });
    await startAt("again", "2027-02-02T00:00:00Z");
    await runDueSchedules(t.db, { now: new Date("2027-02-02T00:00:01Z") });
    await startAt("again", "2027-02-02T00:00:00Z");
    expect(await runDueSchedules(t.db, { now: new Date("2027-02-02T00:00:02Z") })).toBe(1);
    expect(await slotsOf("again")).toEqual(["2027-02-02T00:00:00.000Z"]);
  });

  describe.each([
    // Paris: clocks go forward 02:00 → 03:00 on 28 March 2027, back 03:00 → 02:00 on 31 October 2027.
    { zone: "Europe/Paris", spring: "2027-03-28", fall: "2027-10-31", springOut: "2027-03-28T01:00:00.000Z", fallOut: "2027-10-31T00:30:00.000Z" },
    // New York: forward on 14 March 2027, back on 7 November 2027 (both at 02:00 local).
    { zone: "America/New_York", spring: "2027-03-14", fall: "2027-11-07", springOut: "2027-03-14T07:00:00.000Z", fallOut: "2027-11-07T05:30:00.000Z" },
  ])("daylight saving in $zone", ({ zone, spring, fall, springOut, fallOut }) => {
    const id = zone.replace(/\W/g, "");

    it("a 02:30 slot that does not exist runs once, at the first valid instant after it", async () => {
      await schedule(`dst-spring-${id}`, "30 2 * * *", { task: "t", timezone: zone, overlap: "allow", db: t.db });
      await startAt(`dst-spring-${id}`, `${spring}T00:00:00Z`);
      await passes(`${spring}T00:00:00Z`, `${spring}T12:00:00Z`, 15 * MINUTE);
      expect(await slotsOf(`dst-spring-${id}`)).toEqual([springOut]);
    });

    it("several missing slots merge into that one run", async () => {
      // 02:00, 02:15, 02:30 and 02:45 do not exist; 03:00 does and is the same instant.
      await schedule(`dst-merge-${id}`, "*/15 2,3 * * *", { task: "t", timezone: zone, overlap: "allow", db: t.db });
      await startAt(`dst-merge-${id}`, `${spring}T00:00:00Z`);
      await passes(`${spring}T00:00:00Z`, `${spring}T12:00:00Z`, 5 * MINUTE);
      const slots = await slotsOf(`dst-merge-${id}`);
      expect(slots).toEqual([0, 15, 30, 45].map((m) => new Date(Date.parse(springOut) + m * MINUTE).toISOString()));
    });

    it("a 02:30 (01:30 in New York) slot that exists twice runs once, at its first occurrence", async () => {
      const cron = zone === "Europe/Paris" ? "30 2 * * *" : "30 1 * * *";
      await schedule(`dst-fall-${id}`, cron, { task: "t", timezone: zone, overlap: "allow", db: t.db });
      await startAt(`dst-fall-${id}`, `${fall}T00:00:00Z`);
      await passes(`${fall}T00:00:00Z`, `${fall}T12:00:00Z`, 15 * MINUTE);
      expect(await slotsOf(`dst-fall-${id}`)).toEqual([fallOut]);
    });

    it("an every-30-minutes schedule skips the repeated hour's second pass", async () => {
      await schedule(`dst-fall-every-${id}`, "*/30 * * * *", { task: "t", timezone: zone, overlap: "allow", db: t.db });
      const from = new Date(Date.parse(fallOut) - 2 * HOUR).toISOString();
      await startAt(`dst-fall-every-${id}`, from);
      await passes(from, new Date(Date.parse(fallOut) + 4 * HOUR).toISOString(), 10 * MINUTE);
      const slots = (await slotsOf(`dst-fall-every-${id}`)).map((s) => Date.parse(s));
      // Six hours of the UTC line minus the hour that repeats: 12 + 1 slots less 2.
      expect(slots).toHaveLength(11);
      const gaps = slots.slice(1).map((s, i) => (s - slots[i]!) / MINUTE);
      expect(gaps.filter((g) => g === 90)).toHaveLength(1);
      expect(gaps.filter((g) => g !== 30 && g !== 90)).toEqual([]);
    });
  });

  describe.each([
    { catchUp: "none" as const, limit: undefined, expected: [] as number[] },
    { catchUp: "last" as const, limit: undefined, expected: [5] },
    { catchUp: "all" as const, limit: 3, expected: [3, 4, 5] },
    { catchUp: "all" as const, limit: undefined, expected: [0, 1, 2, 3, 4, 5] },
  ])("after downtime, catchUp $catchUp (limit $limit)", ({ catchUp, limit, expected }) => {
    it(`runs hours ${expected.join(", ") || "none"} of the six missed, then resumes on time`, async () => {
      const name = `catchup-${catchUp}-${limit ?? "default"}`;
      await schedule(name, "0 * * * *", { task: "t", catchUp, ...(limit ? { catchUpLimit: limit } : {}), overlap: "allow", db: t.db });
      await startAt(name, "2027-04-01T00:00:00Z");
      await runDueSchedules(t.db, { now: new Date("2027-04-01T05:30:00Z") });
      expect(await slotsOf(name)).toEqual(expected.map((h) => `2027-04-01T0${h}:00:00.000Z`));
      const row = (await listSchedules({ db: t.db })).find((s) => s.name === name)!;
      expect(row.nextRunAt!.toISOString()).toBe("2027-04-01T06:00:00.000Z");
      expect(row.lastRunAt!.toISOString()).toBe("2027-04-01T05:00:00.000Z");
      await runDueSchedules(t.db, { now: new Date("2027-04-01T06:00:01Z") });
      expect((await slotsOf(name)).at(-1)).toBe("2027-04-01T06:00:00.000Z");
    });
  });

  it('overlap "skip" enqueues no run while the previous one is pending or running; "allow" does', async () => {
    await schedule("skip", "* * * * *", { task: "overlap-skip", queue: "overlap", db: t.db });
    await schedule("allow", "* * * * *", { task: "overlap-allow", queue: "overlap", overlap: "allow", db: t.db });
    for (const name of ["skip", "allow"]) await startAt(name, "2027-05-01T00:00:00Z");
    await runDueSchedules(t.db, { now: new Date("2027-05-01T00:00:01Z") });
    await runDueSchedules(t.db, { now: new Date("2027-05-01T00:01:01Z") });
    expect(await slotsOf("skip")).toEqual(["2027-05-01T00:00:00.000Z"]);
    expect(await slotsOf("allow")).toEqual(["2027-05-01T00:00:00.000Z", "2027-05-01T00:01:00.000Z"]);
    await t.sql(`UPDATE {jobs} SET status = 'done', finished_at = ${t.db.sql.now} WHERE idempotency_key LIKE 'schedule:skip@%'`);
    await runDueSchedules(t.db, { now: new Date("2027-05-01T00:02:01Z") });
    expect(await slotsOf("skip")).toEqual(["2027-05-01T00:00:00.000Z", "2027-05-01T00:02:00.000Z"]);
  });

  it("pauseSchedule cancels pending runs and stops new ones; resumeSchedule starts from the next slot after now; unschedule cancels and removes", async () => {
    await schedule("pausing", "* * * * *", { task: "p", overlap: "allow", db: t.db });
    await startAt("pausing", "2027-06-01T00:00:00Z");
    await runDueSchedules(t.db, { now: new Date("2027-06-01T00:00:01Z") });
    expect(await slotsOf("pausing", "pending")).toHaveLength(1);
    expect(await pauseSchedule("pausing", { db: t.db })).toBe(true);
    expect(await slotsOf("pausing", "pending")).toEqual([]);
    expect(await slotsOf("pausing", "cancelled")).toHaveLength(1);
    await runDueSchedules(t.db, { now: new Date("2027-06-01T00:05:01Z") });
    expect(await slotsOf("pausing")).toHaveLength(1);
    expect((await listSchedules({ db: t.db })).find((s) => s.name === "pausing")!.paused).toBe(true);
    // Declaring it again at start-up does not resume it.
    expect(await schedule("pausing", "* * * * *", { task: "p", overlap: "allow", db: t.db })).toBe("unchanged");

    expect(await resumeSchedule("pausing", { db: t.db })).toBe(true);
    const resumed = (await listSchedules({ db: t.db })).find((s) => s.name === "pausing")!;
    expect(resumed.paused).toBe(false);
    expect(resumed.nextRunAt!.getTime()).toBeGreaterThan((await t.now()).getTime());

    await startAt("pausing", "2027-06-01T00:10:00Z");
    await runDueSchedules(t.db, { now: new Date("2027-06-01T00:10:01Z") });
    expect(await slotsOf("pausing", "pending")).toEqual(["2027-06-01T00:10:00.000Z"]);
    expect(await unschedule("pausing", { db: t.db })).toBe(true);
    expect(await slotsOf("pausing", "pending")).toEqual([]);
    expect((await listSchedules({ db: t.db })).map((s) => s.name)).not.toContain("pausing");
    expect(await unschedule("pausing", { db: t.db })).toBe(false);
    expect(await pauseSchedule("pausing", { db: t.db })).toBe(false);
  });

  it("a pass that read a schedule before it was paused enqueues nothing", async () => {
    await schedule("stale-read", "* * * * *", { task: "p", overlap: "allow", db: t.db });
    await startAt("stale-read", "2027-06-02T00:00:00Z");
    const stale = (await readSchedule(t.db, "stale-read"))!;
    await pauseSchedule("stale-read", { db: t.db });
    expect(await runSchedule(t.db, stale, new Date("2027-06-02T00:00:01Z"), 60_000, silentLogger)).toBe(0);
    expect(await slotsOf("stale-read")).toEqual([]);
  });

  it("a run sees its planned time as ctx.scheduledAt, however late it runs; other jobs see null", async () => {
    await schedule("planned", "0 3 * * *", { task: "report", queue: "planned", payload: { org: 7 }, overlap: "allow", db: t.db });
    await startAt("planned", "2027-07-01T03:00:00Z");
    await runDueSchedules(t.db, { now: new Date("2027-07-01T09:00:00Z") });
    await enqueue("report", { org: 8 }, { db: t.db, queue: "planned" });
    const seen: [unknown, Date | null][] = [];
    const handlers = { report: (payload: unknown, ctx: JobContext) => void seen.push([payload, ctx.scheduledAt]) };
    while (await processOne(handlers, { db: t.db, queue: "planned" }));
    expect(seen).toEqual([
      [{ org: 7 }, new Date("2027-07-01T03:00:00Z")],
      [{ org: 8 }, null],
    ]);
  });

  it("triggerSchedule enqueues a run now; a missing schedule is a JobError", async () => {
    await schedule("trigger-me", "0 0 1 1 *", { task: "tr", queue: "trigger", db: t.db });
    const id = await triggerSchedule("trigger-me", { db: t.db });
    const [row] = await t.sql<{ task: string; queue: string; status: string }>("SELECT task, queue, status FROM {all} WHERE id = $1", [id]);
    expect(row).toEqual({ task: "tr", queue: "trigger", status: "pending" });
    await expect(triggerSchedule("nope", { db: t.db })).rejects.toBeInstanceOf(JobError);
  });
});

describe("the scheduler's walk over missed slots", () => {
  const row = (cron: string, catchUp: "none" | "last" | "all", nextRunAt: string) => ({
    name: "walk",
    cron,
    timezone: "UTC",
    task: "t",
    payload: null,
    queue: "default",
    tenant: null,
    catchUp,
    catchUpLimit: 3,
    overlap: "allow" as const,
    paused: false,
    fromCode: false,
    definition: "",
    nextRunAt: new Date(nextRunAt),
    lastRunAt: null,
  });

  it("after a week away from an every-second schedule, finds the latest slots without walking them all", () => {
    const now = new Date("2027-01-08T00:00:00.500Z");
    const last = slotsToRun(row("* * * * * *", "last", "2027-01-01T00:00:00Z"), now, 0);
    expect(last.run.map((d) => d.toISOString())).toEqual(["2027-01-08T00:00:00.000Z"]);
    expect(last.next!.toISOString()).toBe("2027-01-08T00:00:01.000Z");
    const all = slotsToRun(row("* * * * * *", "all", "2027-01-01T00:00:00Z"), now, 0);
    expect(all.run.map((d) => d.toISOString())).toEqual(["2027-01-07T23:59:58.000Z", "2027-01-07T23:59:59.000Z", "2027-01-08T00:00:00.000Z"]);
  });

  it("keeps slots found less than the on-time window late, whatever the policy", () => {
    const now = new Date("2027-01-01T00:00:30Z");
    const none = slotsToRun(row("*/10 * * * * *", "none", "2027-01-01T00:00:00Z"), now, 25_000);
    expect(none.run.map((d) => d.toISOString())).toEqual(["2027-01-01T00:00:10.000Z", "2027-01-01T00:00:20.000Z", "2027-01-01T00:00:30.000Z"]);
    expect(none.latest!.toISOString()).toBe("2027-01-01T00:00:30.000Z");
  });
});
