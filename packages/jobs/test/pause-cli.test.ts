import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, statusCounts } from "../src/index.js";
import { backends, uniqueName, type TestDatabase } from "./helpers/backends.js";
import { cli } from "./helpers/cli.js";

describe("forge-jobs queues: usage", () => {
  it("queues --help names its actions; the main help names the command", async () => {
    const help = await cli(["queues", "--help"]);
    expect(help.code).toBe(0);
    for (const text of ["Usage: forge-jobs queues", "pause <queue>", "resume <queue>", "--json", "--database-url"]) expect(help.stdout).toContain(text);
    expect((await cli(["--help"])).stdout).toMatch(/queues +list queues and whether each is paused/);
  });
});

describe.each(backends())("forge-jobs queues and status with paused queues ($name)", (backend) => {
  let t: TestDatabase;
  let common: string[];
  beforeAll(async () => {
    t = await backend.create();
    common = ["--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])];
  });
  afterAll(() => t.close());

  it("pause and resume a queue; list and status mark it paused; bad input exits 2 and writes nothing", async () => {
    const mail = uniqueName("mail");
    const other = uniqueName("other");
    await enqueue("send", null, { db: t.db, queue: mail });
    await enqueue("send", null, { db: t.db, queue: other });

    const paused = await cli(["queues", "pause", mail, ...common]);
    expect(paused).toMatchObject({ code: 0, stdout: `paused ${mail}; running jobs finish, no worker starts another until it is resumed\n` });
    expect((await statusCounts({ db: t.db, queue: mail }))[0]!.paused).toBe(true);
    expect((await cli(["queues", "pause", mail, ...common])).stdout).toBe(`${mail} was already paused\n`);

    const list = await cli(["queues", ...common]);
    expect(list.code).toBe(0);
    const rows = list.stdout
      .trim()
      .split("\n")
      .map((line) => line.split(/\s+/));
    expect(rows[0]).toEqual(["QUEUE", "STATE", "PENDING", "RUNNING", "READY"]);
    expect(rows).toContainEqual([mail, "paused", "1", "0", "1"]);
    expect(rows).toContainEqual([other, "active", "1", "0", "1"]);
    const json = JSON.parse((await cli(["queues", "list", "--json", ...common])).stdout) as { queue: string; paused: boolean }[];
    expect(json).toContainEqual({ queue: mail, paused: true, pending: 1, running: 0, ready: 1 });

    const status = await cli(["status", ...common]);
    const lines = status.stdout
      .trim()
      .split("\n")
      .map((line) => line.split(/\s+/));
    expect(lines[0]).toEqual(["QUEUE", "PENDING", "RUNNING", "FAILED", "DONE", "READY", "WAITING", "STATE"]);
    expect(lines.find((l) => l[0] === mail)?.at(-1)).toBe("paused");
    expect(lines.find((l) => l[0] === other)?.at(-1)).toBe("active");
    const statusJson = JSON.parse((await cli(["status", "--json", "--queue", mail, ...common])).stdout) as { queue: string; paused: boolean }[];
    expect(statusJson).toMatchObject([{ queue: mail, paused: true }]);

    const resumed = await cli(["queues", "resume", mail, ...common]);
    expect(resumed).toMatchObject({ code: 0, stdout: `resumed ${mail}\n` });
    expect((await cli(["queues", "resume", mail, ...common])).stdout).toBe(`${mail} was not paused; nothing to do\n`);
    expect((await cli(["status", ...common])).stdout.split("\n")[0]!.split(/\s+/)).not.toContain("STATE");

    expect(await cli(["queues", "pause", ...common])).toMatchObject({ code: 2, stderr: "forge-jobs queues: error: usage: forge-jobs queues pause <queue>\n" });
    expect((await cli(["queues", "stop", mail, ...common])).code).toBe(2);
    const long = await cli(["queues", "pause", "q".repeat(300), ...common]);
    expect(long.code).toBe(2);
    expect(long.stderr).toMatch(/^forge-jobs queues: error: queue /);
    expect(await t.sql(`SELECT queue FROM ${t.tableName("jobs_queues")}`)).toEqual([]);
  });

  it("a paused queue with no jobs is listed and is no unknown queue for status --queue", async () => {
    const empty = uniqueName("empty");
    await cli(["queues", "pause", empty, ...common]);
    const status = await cli(["status", "--queue", empty, ...common]);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`^${empty}\\s+0\\s+0\\s+0\\s+0\\s+0\\s+0\\s+paused$`, "m"));
    expect((await cli(["queues", ...common])).stdout).toMatch(new RegExp(`^${empty}\\s+paused\\s+0\\s+0\\s+0$`, "m"));
    await cli(["queues", "resume", empty, ...common]);
  });
});
