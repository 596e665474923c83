import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, getJob, listLimits, processOne } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";
import { cli } from "./helpers/cli.js";

// Issue 31.7 and 31.8: the CLI's answers to awkward arguments. Runs the built binary (pnpm build).

describe("forge-jobs CLI: arguments", () => {
  it("a negative number given to an option reaches the option's own check, not parseArgs' 'argument is ambiguous'", async () => {
    const cases: [string[], string][] = [
      [["limits", "set", "k", "--concurrency", "-1"], 'forge-jobs limits: error: --concurrency must be a whole number ≥ 0, got "-1"'],
      [["limits", "set", "k", "--rate", "5/1s", "--burst", "-2"], 'forge-jobs limits: error: --burst must be a whole number ≥ 0, got "-2"'],
      [["status", "--watch", "-0.5"], 'forge-jobs status: error: --watch must be a number ≥ 0, got "-0.5"'],
    ];
    for (const [args, message] of cases) {
      const result = await cli(args);
      expect(result.stderr.trim(), args.join(" ")).toBe(message);
      expect(result.code, args.join(" ")).toBe(2);
    }
  });

  it("show, retry and cancel word a bad job id one way: what an id is, and what was given", async () => {
    for (const [command, given] of [
      ["show", "abc"],
      ["show", "0"],
      ["show", "1.5"],
      ["retry", "x1"],
      ["cancel", "0"],
    ]) {
      const result = await cli([command!, given!]);
      expect(result.stderr.trim()).toBe(
        `forge-jobs ${command}: error: the job id must be a positive integer (the ID column of forge-jobs list), got ${JSON.stringify(given)}`,
      );
      expect(result.code).toBe(2);
    }
    const before = await cli(["list", "--before", "soon"]);
    expect(before.stderr.trim()).toBe('forge-jobs list: error: --before must be a positive integer (the ID column of forge-jobs list), got "soon"');
  });
});

describe.each(backends())("forge-jobs CLI against $name: retry --yes", (backend) => {
  let t: TestDatabase;
  let common: string[];
  beforeAll(async () => {
    t = await backend.create();
    common = ["--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])];
  });
  afterAll(() => t.close());

  it("retry --yes without filters retries every failed job, as the README's default --status failed says; --tenant still scopes it", async () => {
    const failed: number[] = [];
    for (const [queue, tenant] of [
      ["mails", "acme"],
      ["exports", "acme"],
      ["mails", "globex"],
    ] as const) {
      failed.push(await enqueue("fails", null, { db: t.db, queue, tenant }));
      await processOne({ fails: () => Promise.reject(new Error("no luck")) }, { db: t.db, queue });
    }
    const cancelled = await enqueue("waits", null, { db: t.db, queue: "mails" });
    await cancelJob(cancelled, { db: t.db });
    const pending = await enqueue("waits", null, { db: t.db, queue: "mails" });

    // Scoped by a filter first: only acme's failed jobs.
    const scoped = await cli(["retry", "--tenant", "acme", "--yes", ...common]);
    expect(scoped.stderr).toBe("");
    expect(scoped.stdout).toBe("retried 2 of 2 job(s)\n");
    expect((await getJob(failed[2]!, { db: t.db }))!.status).toBe("failed");

    const all = await cli(["retry", "--yes", ...common]);
    expect(all.stderr).toBe("");
    expect(all.code).toBe(0);
    expect(all.stdout).toBe("retried 1 of 1 job(s)\n");
    for (const id of failed) expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
    // A cancelled job is not a failed one: --status cancelled asks for it.
    expect((await getJob(cancelled, { db: t.db }))!.status).toBe("cancelled");
    expect((await getJob(pending, { db: t.db }))!.status).toBe("pending");
    expect(await listLimits({ db: t.db })).toEqual([]);
  });
});
