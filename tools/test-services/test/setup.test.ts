import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { needsService, skipNotice } from "../src/optional.js";
import { answers, chooseBackends } from "../src/setup.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
/** A port nothing listens on: a server that does not answer. */
const DEAD_PG = "postgres://postgres@127.0.0.1:1/test";

/** The servers this run would use (the same variables and defaults as setup.ts), without CI. */
const SERVERS: NodeJS.ProcessEnv = { FORGE_TEST_PG_URL: process.env.FORGE_TEST_PG_URL, FORGE_TEST_MYSQL_URL: process.env.FORGE_TEST_MYSQL_URL };
// Probed here on their own, not through chooseBackends (the function under test). Outside CI,
// a server that does not answer skips the test with the suite's notice (the one setup.ts
// prints); in CI both must answer, so the test runs and fails if one does not.
const everyServerAnswers =
  (await answers(SERVERS.FORGE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test", 5432)) &&
  (await answers(SERVERS.FORGE_TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test", 3306));
const downNotices = everyServerAnswers ? [] : (await chooseBackends(SERVERS)).notices;
const runAllServers = needsService(
  everyServerAnswers,
  downNotices.join("\n") || skipNotice("PostgreSQL or MariaDB did not answer", '"with every server answering" is skipped', "start both servers"),
);

describe("the test run's choice of backends", () => {
  it("outside CI, leaves out a server that does not answer, in one line naming it, how to start it and how to choose", async () => {
    const { backends, notices } = await chooseBackends({ FORGE_TEST_PG_URL: DEAD_PG });
    expect(backends).toBe("sqlite,mysql");
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(
      /PostgreSQL is not answering at 127\.0\.0\.1:1; its tests are skipped \(start it: pg_ctlcluster .*FORGE_TEST_BACKENDS=sqlite,mysql\)/,
    );
  });

  it("in CI, or with FORGE_TEST_BACKENDS set, leaves nothing out by itself", async () => {
    expect(await chooseBackends({ CI: "true", FORGE_TEST_PG_URL: DEAD_PG })).toEqual({ backends: undefined, notices: [] });
    expect(await chooseBackends({ FORGE_TEST_BACKENDS: "postgres", FORGE_TEST_PG_URL: DEAD_PG })).toEqual({ backends: "postgres", notices: [] });
  });

  it.runIf(runAllServers)("with every server answering, runs them all", async () => {
    expect(await chooseBackends(SERVERS)).toEqual({ backends: undefined, notices: [] });
  });

  it("pnpm test without PostgreSQL: a notice, the other backends' tests run, and the run is green", async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, FORGE_TEST_PG_URL: DEAD_PG };
    delete env.CI;
    delete env.FORGE_TEST_BACKENDS;
    delete env.VITEST;
    delete env.VITEST_WORKER_ID;
    delete env.VITEST_POOL_ID;
    const run = spawn(process.execPath, [path.join(ROOT, "node_modules/vitest/vitest.mjs"), "run", "--reporter=verbose", "packages/jobs/test/tenant.test.ts"], {
      cwd: ROOT,
      env,
    });
    let out = "";
    run.stdout.on("data", (d: Buffer) => (out += d.toString()));
    run.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => run.on("close", resolve));
    expect(out).toContain("PostgreSQL is not answering");
    expect(out).toContain("tenants ('sqlite')");
    expect(out).not.toContain("tenants ('postgres')");
    expect(code, out).toBe(0);
  });
});
