import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, JobError, listGroups, listLimits, removeLimit, setGroupWeight, setLimit, type LimitStatus } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

// Jobs get their concurrency key and group by SQL until the enqueue options `concurrencyKey`
// and `group` land; running jobs are made by SQL too, so no claim takes part in these counts.

describe.each(backends())("limits and groups: the operator's API ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const limitRows = () => t.sql(`SELECT limit_key, concurrency, rate_limit, rate_per_seconds, rate_burst FROM ${t.db.limitsTable} ORDER BY limit_key`);
  const groupRows = () => t.sql<{ group_key: string; weight: number | string }>(`SELECT group_key, weight FROM ${t.db.groupsTable} ORDER BY group_key`);

  /** Jobs of `key`: `running` holding a lease, `ready` due now, `delayed` due in ten minutes. */
  async function jobsOf(key: string, counts: { running?: number; ready?: number; delayed?: number }): Promise<number[]> {
    const ids: number[] = [];
    const make = async (state: "running" | "ready" | "delayed") => {
      const id = await enqueue("keyed", null, { db: t.db, queue: "limits", ...(state === "delayed" ? { availableIn: 600 } : {}) });
      await t.sql("UPDATE {jobs} SET concurrency_key = $1 WHERE id = $2", [key, id]);
      if (state === "running") {
        await t.sql(
          `UPDATE {jobs} SET status = 'running', started_at = ${t.db.sql.now}, locked_until = ${t.db.sql.nowPlus("600")}, claim_token = $1, attempts = 1 WHERE id = $2`,
          [randomUUID(), id],
        );
      }
      ids.push(id);
    };
    for (let i = 0; i < (counts.running ?? 0); i++) await make("running");
    for (let i = 0; i < (counts.ready ?? 0); i++) await make("ready");
    for (let i = 0; i < (counts.delayed ?? 0); i++) await make("delayed");
    return ids;
  }

  async function limitsOf(prefix: string): Promise<LimitStatus[]> {
    return (await listLimits({ db: t.db })).filter((l) => l.key.startsWith(prefix));
  }

  function refusal(call: () => Promise<unknown>): Promise<unknown> {
    return call().then(
      (value) => ({ resolved: value }),
      (error: unknown) => error,
    );
  }

  const bad: [string, () => Promise<unknown>, RegExp][] = [
    ["an empty key", () => setLimit("", { concurrency: 1 }, { db: t.db }), /^setLimit: key must be a non-empty string, got ""$/],
    ["a key that is not a string", () => setLimit(42 as never, { concurrency: 1 }, { db: t.db }), /key must be a non-empty string, got 42/],
    [
      "a star inside a key",
      () => setLimit("org:*:mail", { concurrency: 1 }, { db: t.db }),
      /has a "\*" before its end; a pattern is a prefix followed by one trailing "\*"/,
    ],
    ["two stars", () => setLimit("org**", { concurrency: 1 }, { db: t.db }), /has a "\*" before its end/],
    ["a key over 191 characters", () => setLimit("k".repeat(192), { concurrency: 1 }, { db: t.db }), /key must be at most 191 characters, got 192/],
    ["no setting", () => setLimit("k", {}, { db: t.db }), /give concurrency, rate or both \(to lift every limit of a key, use removeLimit\)/],
    ["a limit that is not an object", () => setLimit("k", 5 as never, { db: t.db }), /the limit must be an object like \{ concurrency: 5 \}/],
    [
      "an unknown setting",
      () => setLimit("k", { concurrency: 1, conc: 2 } as never, { db: t.db }),
      /setLimit: limit: unknown option "conc"; allowed: concurrency, rate/,
    ],
    ["a negative concurrency", () => setLimit("k", { concurrency: -1 }, { db: t.db }), /concurrency must be an integer from 0 to \d+, got -1/],
    ["a fractional concurrency", () => setLimit("k", { concurrency: 1.5 }, { db: t.db }), /concurrency must be an integer from 0 to \d+, got 1.5/],
    ["a concurrency given as text", () => setLimit("k", { concurrency: "5" as never }, { db: t.db }), /concurrency must be an integer from 0 to \d+, got "5"/],
    [
      "a rate that is not an object",
      () => setLimit("k", { rate: 14 as never }, { db: t.db }),
      /rate must be an object \{ limit, perSeconds, burst\? \}, got 14/,
    ],
    ["a rate limit of 0", () => setLimit("k", { rate: { limit: 0, perSeconds: 1 } }, { db: t.db }), /rate.limit must be an integer from 1 to \d+, got 0/],
    ["a fractional rate limit", () => setLimit("k", { rate: { limit: 2.5, perSeconds: 1 } }, { db: t.db }), /rate.limit must be an integer from 1/],
    ["perSeconds 0", () => setLimit("k", { rate: { limit: 1, perSeconds: 0 } }, { db: t.db }), /rate.perSeconds must be a number of seconds > 0, got 0/],
    [
      "perSeconds infinite",
      () => setLimit("k", { rate: { limit: 1, perSeconds: Infinity } }, { db: t.db }),
      /rate.perSeconds must be a number of seconds > 0, got Infinity/,
    ],
    [
      "perSeconds missing",
      () => setLimit("k", { rate: { limit: 1 } as never }, { db: t.db }),
      /rate.perSeconds must be a number of seconds > 0, got undefined/,
    ],
    ["a burst of 0", () => setLimit("k", { rate: { limit: 1, perSeconds: 1, burst: 0 } }, { db: t.db }), /rate.burst must be an integer from 1 to \d+, got 0/],
    [
      "an unknown rate field",
      () => setLimit("k", { rate: { limit: 1, perSeconds: 1, per: 2 } as never }, { db: t.db }),
      /setLimit: rate: unknown option "per"/,
    ],
    ["an unknown option", () => setLimit("k", { concurrency: 1 }, { db: t.db, tenant: "a" } as never), /^setLimit: unknown option "tenant"; allowed: db$/],
    ["removeLimit of a bad pattern", () => removeLimit("a*b", { db: t.db }), /^removeLimit: key "a\*b" has a "\*" before its end/],
    ["removeLimit with an unknown option", () => removeLimit("k", { db: t.db, queue: "x" } as never), /^removeLimit: unknown option "queue"/],
    ["listLimits with an unknown option", () => listLimits({ db: t.db, queue: "x" } as never), /^listLimits: unknown option "queue"/],
  ];

  it.each(bad)("setLimit refuses %s with a JobError and writes nothing", async (_what, call, message) => {
    await setLimit("kept", { concurrency: 3 }, { db: t.db });
    const before = await limitRows();
    const outcome = await refusal(call);
    expect(outcome).toBeInstanceOf(JobError);
    expect((outcome as JobError).message).toMatch(message);
    expect(await limitRows()).toEqual(before);
  });

  it("stores a limit, lists it with burst defaulting to limit, replaces both settings, and removes it", async () => {
    await setLimit("set:smtp", { concurrency: 5, rate: { limit: 14, perSeconds: 1 } }, { db: t.db });
    expect(await limitsOf("set:")).toEqual([{ key: "set:smtp", concurrency: 5, rate: { limit: 14, perSeconds: 1, burst: 14 }, running: 0, throttled: 0 }]);
    // Setting again replaces: the concurrency left out is gone, not kept.
    await setLimit("set:smtp", { rate: { limit: 2, perSeconds: 0.5, burst: 4 } }, { db: t.db });
    expect(await limitsOf("set:")).toEqual([{ key: "set:smtp", concurrency: null, rate: { limit: 2, perSeconds: 0.5, burst: 4 }, running: 0, throttled: 0 }]);
    await setLimit("set:api*", { concurrency: 0 }, { db: t.db });
    await setLimit("set:a", { concurrency: 1 }, { db: t.db });
    expect((await limitsOf("set:")).map((l) => [l.key, l.concurrency, l.rate])).toEqual([
      ["set:a", 1, null],
      ["set:api*", 0, null],
      ["set:smtp", null, { limit: 2, perSeconds: 0.5, burst: 4 }],
    ]);
    expect(await removeLimit("set:smtp", { db: t.db })).toBe(true);
    expect(await removeLimit("set:smtp", { db: t.db })).toBe(false);
    expect(await removeLimit("set:api*", { db: t.db })).toBe(true);
    expect((await limitsOf("set:")).map((l) => l.key)).toEqual(["set:a"]);
  });

  it("counts each running key under the one rule that governs it: exact over patterns, the longest pattern over shorter ones", async () => {
    await setLimit("pre:*", { concurrency: 10 }, { db: t.db });
    await setLimit("pre:org:*", { concurrency: 2 }, { db: t.db });
    await setLimit("pre:org:1", { concurrency: 1 }, { db: t.db });
    await jobsOf("pre:org:1", { running: 1 });
    await jobsOf("pre:org:2", { running: 2 });
    await jobsOf("pre:org:3", { running: 1, delayed: 1 });
    await jobsOf("pre:x", { running: 3 });
    await jobsOf("unlimited:y", { running: 4 });
    const running = async () => Object.fromEntries((await limitsOf("pre:")).map((l) => [l.key, l.running]));
    expect(await running()).toEqual({ "pre:*": 3, "pre:org:*": 3, "pre:org:1": 1 });
    // Without its exact rule, org:1 counts under the longest pattern that matches it.
    await removeLimit("pre:org:1", { db: t.db });
    expect(await running()).toEqual({ "pre:*": 3, "pre:org:*": 4 });
    await removeLimit("pre:org:*", { db: t.db });
    expect(await running()).toEqual({ "pre:*": 7 });
  });

  it("throttled: the ready jobs beyond a key's room under its concurrency limit, per key under a pattern", async () => {
    await setLimit("conc:full", { concurrency: 2 }, { db: t.db });
    await jobsOf("conc:full", { running: 2, ready: 3, delayed: 1 });
    await setLimit("conc:room", { concurrency: 3 }, { db: t.db });
    await jobsOf("conc:room", { running: 2, ready: 3 });
    await setLimit("conc:paused", { concurrency: 0 }, { db: t.db });
    await jobsOf("conc:paused", { ready: 2 });
    // Lowered under what runs: every ready job waits, the running ones are counted as they are.
    await setLimit("conc:lowered", { concurrency: 1 }, { db: t.db });
    await jobsOf("conc:lowered", { running: 3, ready: 1 });
    await setLimit("conc:each:*", { concurrency: 1 }, { db: t.db });
    await jobsOf("conc:each:a", { running: 1, ready: 2 });
    await jobsOf("conc:each:b", { ready: 2 });
    const byKey = Object.fromEntries((await limitsOf("conc:")).map((l) => [l.key, [l.running, l.throttled]]));
    expect(byKey).toEqual({
      "conc:each:*": [1, 3],
      "conc:full": [2, 3],
      "conc:lowered": [3, 1],
      "conc:paused": [0, 2],
      "conc:room": [2, 2],
    });
  });

  it("throttled: the ready jobs beyond the whole tokens in a key's bucket (no bucket row: a full bucket)", async () => {
    const bucket = (key: string, tokens: number, agoSeconds: number) =>
      t.sql(`INSERT INTO ${t.db.keysTable} (concurrency_key, tokens, refilled_at) VALUES ($1, $2, ${t.db.sql.nowPlus(String(agoSeconds), "-")})`, [
        key,
        tokens,
      ]);
    const hourly = { limit: 1, perSeconds: 3600 };
    await setLimit("rate:empty", { rate: hourly }, { db: t.db });
    await jobsOf("rate:empty", { ready: 2, delayed: 1 });
    await bucket("rate:empty", 0, 0);
    await setLimit("rate:norow", { rate: hourly }, { db: t.db });
    await jobsOf("rate:norow", { ready: 2 });
    await setLimit("rate:burst", { rate: { ...hourly, burst: 5 } }, { db: t.db });
    await jobsOf("rate:burst", { ready: 2 });
    // Empty an hour and a half ago: refilled by one whole token since.
    await setLimit("rate:refilled", { rate: hourly }, { db: t.db });
    await jobsOf("rate:refilled", { ready: 3 });
    await bucket("rate:refilled", 0, 5400);
    // Both limits: the smaller room wins (two tokens, one free slot).
    await setLimit("rate:both", { concurrency: 2, rate: { limit: 2, perSeconds: 3600 } }, { db: t.db });
    await jobsOf("rate:both", { running: 1, ready: 3 });
    const byKey = Object.fromEntries((await limitsOf("rate:")).map((l) => [l.key, l.throttled]));
    expect(byKey).toEqual({ "rate:both": 2, "rate:burst": 0, "rate:empty": 2, "rate:norow": 1, "rate:refilled": 2 });
  });

  it("setGroupWeight stores a weight, replaces it, deletes the row at the default weight 1, and refuses bad input writing nothing", async () => {
    await setGroupWeight("gw:a", 3, { db: t.db });
    await setGroupWeight("gw:b", 2, { db: t.db });
    await setGroupWeight("gw:a", 5, { db: t.db });
    expect((await groupRows()).map((r) => [r.group_key, Number(r.weight)])).toEqual([
      ["gw:a", 5],
      ["gw:b", 2],
    ]);
    await setGroupWeight("gw:b", 1, { db: t.db });
    expect((await groupRows()).map((r) => r.group_key)).toEqual(["gw:a"]);
    const before = await groupRows();
    const calls: [() => Promise<unknown>, RegExp][] = [
      [() => setGroupWeight("", 2, { db: t.db }), /^setGroupWeight: group must be a non-empty string, got ""$/],
      [() => setGroupWeight("g".repeat(192), 2, { db: t.db }), /group must be at most 191 characters/],
      [() => setGroupWeight("gw:a", 0, { db: t.db }), /weight must be an integer from 1 to \d+, got 0/],
      [() => setGroupWeight("gw:a", 1.5, { db: t.db }), /weight must be an integer from 1/],
      [() => setGroupWeight("gw:a", "2" as never, { db: t.db }), /weight must be an integer from 1 to \d+, got "2"/],
      [() => setGroupWeight("gw:a", 2, { db: t.db, tenant: "x" } as never), /^setGroupWeight: unknown option "tenant"; allowed: db$/],
      [() => listGroups({ db: t.db, queue: "q" } as never), /^listGroups: unknown option "queue"/],
    ];
    for (const [call, message] of calls) {
      const outcome = await refusal(call);
      expect(outcome).toBeInstanceOf(JobError);
      expect((outcome as JobError).message).toMatch(message);
    }
    expect(await groupRows()).toEqual(before);
  });

  it("listGroups: weight, ready and running per group, and the wait p50/p95 of jobs started in the last five minutes", async () => {
    await setGroupWeight("lg:quiet", 4, { db: t.db });
    const grouped = async (group: string, state: "ready" | "delayed" | "running" | "done", waitSeconds = 0, startedAgo = 1) => {
      const id = await enqueue("grouped", null, { db: t.db, queue: "groups", ...(state === "delayed" ? { availableIn: 600 } : {}) });
      await t.sql("UPDATE {jobs} SET group_key = $1 WHERE id = $2", [group, id]);
      if (state === "running" || state === "done") {
        const startedAt = t.db.sql.nowPlus(String(startedAgo), "-");
        await t.sql(
          `UPDATE {jobs} SET status = $1, run_at = ${t.db.sql.nowPlus(String(startedAgo + waitSeconds), "-")}, started_at = ${startedAt},
             finished_at = ${state === "done" ? t.db.sql.now : "NULL"}, claim_token = $2 WHERE id = $3`,
          [state, state === "running" ? randomUUID() : null, id],
        );
      }
    };
    await grouped("lg:busy", "ready");
    await grouped("lg:busy", "ready");
    await grouped("lg:busy", "delayed");
    await grouped("lg:busy", "running", 1);
    await grouped("lg:busy", "done", 3);
    // Started ten minutes ago: outside the window.
    await grouped("lg:busy", "done", 100, 600);
    const groups = (await listGroups({ db: t.db })).filter((g) => g.group.startsWith("lg:"));
    expect(groups).toEqual([
      { group: "lg:busy", weight: 1, ready: 2, running: 1, waitP50Ms: 2000, waitP95Ms: 2900 },
      { group: "lg:quiet", weight: 4, ready: 0, running: 0, waitP50Ms: null, waitP95Ms: null },
    ]);
  });
});
