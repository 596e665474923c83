import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listSchedules, schedule } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";
import { cli } from "./helpers/cli.js";

describe("forge-jobs schedules: usage", () => {
  it("schedules --help names its actions; worker --help its --no-schedules", async () => {
    const help = await cli(["schedules", "--help"]);
    expect(help.code).toBe(0);
    for (const text of ["Usage: forge-jobs schedules", "pause <name>", "resume <name>", "trigger <name>", "--database-url"])
      expect(help.stdout).toContain(text);
    expect((await cli(["worker", "--help"])).stdout).toContain("--no-schedules");
    expect((await cli(["--help"])).stdout).toMatch(/schedules +list recurring schedules/);
  });
});

describe.each(backends())("forge-jobs schedules and doctor ($name)", (backend) => {
  let t: TestDatabase;
  let common: string[];
  let dir: string;
  beforeAll(async () => {
    t = await backend.create();
    common = ["--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])];
    dir = await mkdtemp(join(tmpdir(), "forge-schedules-cli-"));
  });
  afterAll(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("list shows next and last run; pause, resume and trigger act on one schedule; an unknown one exits 1", async () => {
    expect((await cli(["schedules", ...common])).stdout).toBe("no schedules\n");
    await schedule("nightly-report", "0 3 * * *", { task: "report", timezone: "Europe/Paris", db: t.db });
    const list = await cli(["schedules", "list", ...common]);
    expect(list.code).toBe(0);
    const [header, line] = list.stdout.trim().split("\n");
    expect(header!.split(/\s+/)).toEqual(["NAME", "CRON", "TIMEZONE", "TASK", "QUEUE", "NEXT_RUN", "LAST_RUN", "STATE"]);
    expect(line).toMatch(/^nightly-report\s+0 3 \* \* \*\s+Europe\/Paris\s+report\s+default\s+\d{4}-\d\d-\d\d 0[12]:00Z\s+-\s+active$/);

    const paused = await cli(["schedules", "pause", "nightly-report", ...common]);
    expect(paused).toMatchObject({ code: 0, stdout: "paused nightly-report; its pending runs are cancelled\n" });
    expect((await listSchedules({ db: t.db }))[0]!.paused).toBe(true);
    const json = JSON.parse((await cli(["schedules", "--json", ...common])).stdout) as { name: string; paused: boolean }[];
    expect(json).toMatchObject([{ name: "nightly-report", paused: true }]);

    const resumed = await cli(["schedules", "resume", "nightly-report", ...common]);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toMatch(/^resumed nightly-report; next run \d{4}-/);
    expect((await listSchedules({ db: t.db }))[0]!.paused).toBe(false);

    const triggered = await cli(["schedules", "trigger", "nightly-report", ...common]);
    expect(triggered.code).toBe(0);
    const id = Number(/enqueued job (\d+)/.exec(triggered.stdout)![1]);
    expect(await t.sql<{ task: string }>("SELECT task FROM {all} WHERE id = $1", [id])).toEqual([{ task: "report" }]);

    for (const action of ["pause", "resume", "trigger"]) {
      const missing = await cli(["schedules", action, "nope", ...common]);
      expect(missing.code, action).toBe(1);
      expect(missing.stderr).toBe("forge-jobs schedules: no schedule named nope; forge-jobs schedules list shows them\n");
    }
    const usage = await cli(["schedules", "pause", ...common]);
    expect(usage).toMatchObject({ code: 2, stderr: "forge-jobs schedules: error: usage: forge-jobs schedules pause <name>\n" });
    expect((await cli(["schedules", "delete", "x", ...common])).code).toBe(2);
  });

  it("doctor names the schedules whose task has no handler", async () => {
    await schedule("orphan", "@daily", { task: "no_such_task", db: t.db });
    const handlers = join(dir, "handlers.mjs");
    await writeFile(handlers, "export default { report: () => 1 };\n");
    const result = await cli(["doctor", "--handlers", handlers, ...common]);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/PROBLEM schedules whose task has no handler in .*: orphan \(task no_such_task\)/);
    await writeFile(handlers, "export default { report: () => 1, no_such_task: () => 2 };\n");
    const fine = await cli(["doctor", "--handlers", handlers, ...common]);
    expect(fine.stdout).toMatch(/ok {6}every schedule's task has a handler \(2 schedule\(s\)\)/);
  });
});
