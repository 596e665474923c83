import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { access, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, listGroups, listLimits, processOne, setGroupWeight, setLimit } from "../src/index.js";
import { claimJobs } from "../src/run/claim.js";
import { backends, waitFor, type TestDatabase } from "./helpers/backends.js";
import { mysql as mysqlDialect } from "../src/dialects/mysql.js";
import { postgres as postgresDialect } from "../src/dialects/postgres.js";
import { sqlite as sqliteDialect } from "../src/dialects/sqlite.js";
import { BIN, cli } from "./helpers/cli.js";

/** SQL for "two hours ago" on the database's clock, in each backend's own time representation. */
const TWO_HOURS_AGO = {
  postgres: postgresDialect.nowPlus("7200", "-"),
  sqlite: sqliteDialect.nowPlus("7200", "-"),
  mysql: mysqlDialect.nowPlus("7200", "-"),
};

describe("forge-jobs CLI: usage", () => {
  it("--version prints the package's version (issue 16.9)", async () => {
    const { version } = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    for (const flag of ["--version", "-V"]) {
      const result = await cli([flag]);
      expect(result.code).toBe(0);
      expect(result.stdout.trim()).toBe(version);
    }
  });

  it("is built (run pnpm build first)", () => {
    expect(existsSync(BIN)).toBe(true);
  });

  it.each(["init", "migrate", "status", "reclaim", "worker", "doctor", "prune", "limits", "groups"])(
    "%s --help prints its usage and exits 0",
    async (command) => {
      const result = await cli([command, "--help"]);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain(`Usage: forge-jobs ${command}`);
      expect(result.stdout).toContain("--database-url");
    },
  );

  it("an unknown command, an unknown option and a bad URL are one clear line with exit code 2", async () => {
    const unknown = await cli(["frobnicate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split("\n")).toHaveLength(1);
    const option = await cli(["status", "--queeue", "x"]);
    expect(option.code).toBe(2);
    expect(option.stderr).toMatch(/forge-jobs status: error: Unknown option '--queeue'/);
    const url = await cli(["status", "--database-url", "redis://localhost"]);
    expect(url.code).toBe(2);
    expect(url.stderr.trim()).toMatch(/^forge-jobs status: error: unsupported database URL "redis:\/\/localhost": use postgres:\/\//);
    const prune = await cli(["prune", "--older-than", "soon"]);
    expect(prune.code).toBe(2);
    expect(prune.stderr).toContain("--older-than must be a duration like 7d");
  });

  it("init writes the migration SQL for review into a folder", async () => {
    const dir = await mkdtemp(join(tmpdir(), "forge-init-"));
    try {
      const result = await cli(["init", "--dir", dir, "--dialect", "postgres"]);
      expect(result.code).toBe(0);
      const files = await readdir(dir);
      expect(files.sort()).toEqual([
        "001_forge_jobs_create_jobs.postgres.sql",
        "002_forge_jobs_add_started_at.postgres.sql",
        "003_forge_jobs_drop_recent_finished.postgres.sql",
        "004_forge_jobs_flow_control.postgres.sql",
        "005_forge_jobs_schedules.postgres.sql",
        "006_forge_jobs_dependencies_and_batches.postgres.sql",
        "007_forge_jobs_finished_counts.postgres.sql",
        "008_forge_jobs_finished_history.postgres.sql",
        "009_forge_jobs_failed_index.postgres.sql",
        "010_forge_jobs_finished_minutes.postgres.sql",
        "011_forge_jobs_counts_without_in_lists.postgres.sql",
        "012_forge_jobs_running_keys_index.postgres.sql",
        "013_forge_jobs_finished_index_without_in_list.postgres.sql",
        "014_forge_jobs_live_jobs_only.postgres.sql",
        "015_forge_jobs_counts_in_history.postgres.sql",
        "016_forge_jobs_running_without_lease.postgres.sql",
        "017_forge_jobs_workers_and_attempts.postgres.sql",
        "018_forge_jobs_durable_steps.postgres.sql",
        "019_forge_jobs_due_flag.postgres.sql",
        "020_forge_jobs_event_waits.postgres.sql",
        "021_forge_jobs_paused_queues.postgres.sql",
        "022_forge_jobs_debounce_keys_dead_letters.postgres.sql",
        "023_forge_jobs_awaited_and_progress.postgres.sql",
        "024_forge_jobs_priority_aging.postgres.sql",
        "025_forge_jobs_sequence_keys.postgres.sql",
        "026_forge_jobs_claim_stable_keys.postgres.sql",
      ]);
      expect(await readFile(join(dir, files[0]!), "utf8")).toMatch(/CREATE TABLE "jobs"/);
      const again = await cli(["init", "--dir", dir, "--dialect", "postgres"]);
      expect(again.stdout).toContain("already there");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  // (audit 12.15) read-only commands never create a database: a mistyped path is an error that names it.
  it.each(["status", "doctor"])("%s on a SQLite path with no database names the path and creates nothing", async (command) => {
    const dir = await mkdtemp(join(tmpdir(), "forge-readonly-"));
    try {
      const path = join(dir, "jbos.db");
      const envs: Record<string, string>[] = [{ DATABASE_URL: `sqlite:${path}` }, {}];
      for (const env of envs) {
        const args = "DATABASE_URL" in env ? [command] : [command, "--database-url", `sqlite:${path}`];
        const result = await cli(args, { env });
        expect(result.code).toBe(2);
        expect(result.stderr.trim().split("\n")).toHaveLength(1);
        expect(result.stderr).toContain(`forge-jobs ${command}: error: no SQLite database at ${path}`);
        expect(await readdir(dir)).toEqual([]);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("init takes the dialect from --dialect or the URL and opens no database (audit 13.7)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "forge-init-"));
    try {
      const mysql = await cli(["init", "--dir", join(dir, "m"), "--dialect", "mysql", "--schema", "app"]);
      expect(mysql.code).toBe(0);
      expect(await readFile(join(dir, "m", "001_forge_jobs_create_jobs.mysql.sql"), "utf8")).toContain("CREATE TABLE IF NOT EXISTS `app`.`jobs`");
      // The URL only names the backend: the file it points to is never created.
      const file = join(dir, "never-opened.db");
      const sqlite = await cli(["init", "--dir", join(dir, "s"), "--database-url", `sqlite:${file}`]);
      expect(sqlite.code).toBe(0);
      expect((await readdir(join(dir, "s"))).every((f) => f.endsWith(".sqlite.sql"))).toBe(true);
      await expect(access(file)).rejects.toThrow();
      const bad = await cli(["init", "--dir", join(dir, "x"), "--dialect", "mysql", "--schema", "no-dashes"]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain("schema must be letters, digits and underscores");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe.each(backends())("forge-jobs CLI against $name", (backend) => {
  let t: TestDatabase;
  let common: string[];
  let dir: string;
  beforeAll(async () => {
    t = await backend.create();
    common = ["--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])];
    dir = await mkdtemp(join(tmpdir(), "forge-cli-"));
  });
  afterAll(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("migrate on a blank database applies, then has nothing to do", async () => {
    const target = await backend.blank();
    try {
      const args = ["--database-url", target.url, ...(target.schema ? ["--schema", target.schema] : [])];
      const before = await cli(["doctor", ...args]);
      const status = await cli(["status", ...args]);
      if (backend.name === "sqlite") {
        // No file yet: the read-only commands say so and leave it to migrate to create one.
        for (const result of [before, status]) {
          expect(result.code).toBe(2);
          expect(result.stderr).toContain("forge-jobs migrate creates the database");
        }
      } else {
        expect(before.code).toBe(1);
        expect(before.stdout).toContain("PROBLEM the jobs schema is not applied");
        expect(status.code).toBe(1);
        expect(status.stderr).toContain("run forge-jobs migrate");
      }
      expect((await cli(["migrate", ...args])).stdout).toMatch(/applied migrations 1/);
      expect((await cli(["migrate", ...args])).stdout).toMatch(/nothing to do/);
    } finally {
      await target.drop();
    }
  });

  it("status prints QUEUE PENDING RUNNING FAILED DONE READY WAITING, and --json for scripts", async () => {
    const first = await enqueue("a", null, { db: t.db, queue: "mails" });
    await enqueue("after", null, { db: t.db, queue: "mails", dependsOn: [first] });
    await enqueue("a", null, { db: t.db, queue: "mails", availableIn: 600 });
    await enqueue("a", null, { db: t.db, queue: "exports" });
    await processOne({ a: () => undefined }, { db: t.db, queue: "exports" });
    const table = await cli(["status", ...common]);
    expect(table.code).toBe(0);
    const lines = table.stdout
      .trim()
      .split("\n")
      .map((l) => l.trim().split(/\s+/));
    expect(lines[0]).toEqual(["QUEUE", "PENDING", "RUNNING", "FAILED", "DONE", "READY", "WAITING"]);
    expect(lines).toContainEqual(["mails", "2", "0", "0", "0", "1", "1"]);
    expect(lines).toContainEqual(["exports", "0", "0", "0", "1", "0", "0"]);
    const one = await cli(["status", "--queue", "mails", "--json", ...common]);
    expect(JSON.parse(one.stdout)).toEqual([expect.objectContaining({ queue: "mails", ready: 1, total: 3 })]);
  });

  it("list, show, retry and cancel: filters, pages, the whole job, and bulk actions counted before --yes (issue 16.9)", async () => {
    const queue = `ops-${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 3; i++) await enqueue("fails", { n: i }, { db: t.db, queue });
    while (await processOne({ fails: () => Promise.reject(new Error("no luck")) }, { db: t.db, queue }));
    const pending = await enqueue("waits", { keep: true }, { db: t.db, queue });

    const listed = await cli(["list", "--queue", queue, "--status", "failed", "--json", ...common]);
    expect(listed.code).toBe(0);
    const page = JSON.parse(listed.stdout) as { jobs: { id: number; lastError: string }[]; next: number | null };
    expect(page.jobs).toHaveLength(3);
    expect(page.jobs[0]!.lastError).toContain("no luck");
    const table = await cli(["list", "--queue", queue, "--limit", "2", ...common]);
    expect(table.stdout).toMatch(/^ID\s+QUEUE\s+TASK\s+STATUS/);
    expect(table.stdout).toMatch(/more: forge-jobs list --before \d+/);
    expect((await cli(["list", "--status", "nope", ...common])).code).toBe(2);

    const shown = await cli(["show", String(pending), ...common]);
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: pending, payload: { keep: true }, status: "pending" });
    expect((await cli(["show", "999999999", ...common])).code).toBe(1);

    const counted = await cli(["retry", "--queue", queue, ...common]);
    expect(counted.stdout).toContain("3 job(s) match; run again with --yes to retry them");
    expect((await getJob(page.jobs[0]!.id, { db: t.db }))!.status).toBe("failed");
    const retried = await cli(["retry", "--queue", queue, "--yes", ...common]);
    expect(retried.stdout).toContain("retried 3 of 3 job(s)");
    expect((await getJob(page.jobs[0]!.id, { db: t.db }))!.status).toBe("pending");

    expect((await cli(["cancel", String(pending), ...common])).stdout).toContain(`cancelled job ${pending}`);
    expect((await cli(["cancel", String(pending), ...common])).code).toBe(1);
    expect((await cli(["retry", ...common])).code).toBe(2);
    // Tasks no handlers module knows: leave nothing for doctor's test to find.
    await t.sql(`DELETE FROM {jobs} WHERE queue = $1`, [queue]);
    await t.sql(`DELETE FROM {history} WHERE queue = $1`, [queue]);
  });

  it("list --task, --tenant and --older-than pick their jobs; cancel with the same filters counts, then cancels only those (issue 16.9)", async () => {
    const queue = `filters-${randomUUID().slice(0, 8)}`;
    const failed = await enqueue("report", null, { db: t.db, queue, tenant: "acme" });
    await processOne({ report: () => Promise.reject(Object.assign(new Error("no"), { retryable: false })) }, { db: t.db, queue });
    const oldAcme = await enqueue("report", null, { db: t.db, queue, tenant: "acme" });
    const newAcme = await enqueue("report", null, { db: t.db, queue, tenant: "acme" });
    const oldGlobex = await enqueue("report", null, { db: t.db, queue, tenant: "globex" });
    const oldMail = await enqueue("mail", null, { db: t.db, queue, tenant: "acme" });
    // Two hours old, by the database's clock (the one --older-than is measured against).
    const ids = [failed, oldAcme, oldGlobex, oldMail];
    // The failed one is in history, the others in the live table.
    for (const table of ["{jobs}", "{history}"]) {
      await t.sql(`UPDATE ${table} SET created_at = ${TWO_HOURS_AGO[backend.name]} WHERE id IN (${ids.map((_, i) => `$${i + 1}`).join(", ")})`, ids);
    }

    const listed = async (...args: string[]) => {
      const result = await cli(["list", "--queue", queue, "--json", ...args, ...common]);
      expect(result.code, result.stderr).toBe(0);
      return (JSON.parse(result.stdout) as { jobs: { id: number }[] }).jobs.map((j) => j.id);
    };
    expect(await listed("--task", "report")).toEqual([oldGlobex, newAcme, oldAcme, failed]);
    expect(await listed("--tenant", "acme")).toEqual([oldMail, newAcme, oldAcme, failed]);
    expect(await listed("--older-than", "1h")).toEqual([oldMail, oldGlobex, oldAcme, failed]);
    expect(await listed("--older-than", "3h")).toEqual([]);
    expect(await listed("--task", "report", "--tenant", "acme", "--older-than", "1h")).toEqual([oldAcme, failed]);
    expect((await cli(["list", "--older-than", "soon", ...common])).code).toBe(2);

    // cancel takes pending jobs of the filter (the failed one is not cancellable): a count first, nothing changed.
    const filter = ["--queue", queue, "--task", "report", "--tenant", "acme", "--older-than", "1h"];
    const counted = await cli(["cancel", ...filter, ...common]);
    expect(counted.code).toBe(0);
    expect(counted.stdout).toContain("1 job(s) match; run again with --yes to cancel them");
    expect((await getJob(oldAcme, { db: t.db }))!.status).toBe("pending");
    const cancelled = await cli(["cancel", ...filter, "--yes", ...common]);
    expect(cancelled.stdout).toContain("cancelled 1 of 1 job(s)");
    const statuses = Object.fromEntries(
      await Promise.all([failed, oldAcme, newAcme, oldGlobex, oldMail].map(async (id) => [id, (await getJob(id, { db: t.db }))!.status])),
    );
    expect(statuses).toEqual({ [failed]: "failed", [oldAcme]: "cancelled", [newAcme]: "pending", [oldGlobex]: "pending", [oldMail]: "pending" });
    // What is left of the tenant's old pending jobs, by the same age filter: the other task only.
    expect((await cli(["cancel", "--queue", queue, "--tenant", "acme", "--older-than", "1h", ...common])).stdout).toContain("1 job(s) match");
    // Tasks no handlers module knows: leave nothing for doctor's test to find.
    await t.sql(`DELETE FROM {jobs} WHERE queue = $1`, [queue]);
    await t.sql(`DELETE FROM {history} WHERE queue = $1`, [queue]);
  });

  it("status --watch below 0.5 s is a usage error (it looped with no delay); an unknown queue is said as such (issue 16.8, 16.10)", async () => {
    const fast = await cli(["status", "--watch", "0", ...common]);
    expect(fast.code).toBe(2);
    expect(fast.stderr).toMatch(/--watch must be at least 0.5 seconds/);
    await enqueue("w", null, { db: t.db, queue: "known" });
    const typo = await cli(["status", "--queue", "nope", ...common]);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toMatch(/no job has ever been in queue "nope"; queues with jobs: .*known/);
  });

  it("status --watch into a pipe appends frames without screen-clearing codes, and leaks no listener over many redraws (issue 16.8)", async () => {
    await enqueue("w", null, { db: t.db, queue: "piped" });
    let frames = 0;
    const result = await cli(["status", "--watch", "0.5", "--queue", "piped", ...common], {
      onStart: (child) => {
        child.stdout!.on("data", (d: Buffer) => {
          frames += (d.toString().match(/Ctrl-C to stop/g) ?? []).length;
          if (frames >= 13) child.kill("SIGINT");
        });
      },
    });
    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain("\x1b[");
    expect(result.stderr).not.toMatch(/MaxListenersExceededWarning/);
  }, 30_000);

  it("status --watch into a reader that stops reading (| head) ends quietly with 0, not an unhandled EPIPE", async () => {
    await enqueue("w", null, { db: t.db, queue: "headed" });
    const result = await cli(["status", "--watch", "0.5", "--queue", "headed", ...common], {
      onStart: (child) => child.stdout!.once("data", () => child.stdout!.destroy()),
    });
    expect(result.stderr).not.toMatch(/EPIPE|Unhandled/);
    expect(result.code).toBe(0);
  }, 30_000);

  it("status --watch redraws until interrupted; with --json each frame is one JSON line", async () => {
    await enqueue("w", null, { db: t.db, queue: "watched" });
    let frames = 0;
    const result = await cli(["status", "--watch", "0.5", "--json", "--queue", "watched", ...common], {
      onStart: (child) => {
        child.stdout!.on("data", (d: Buffer) => {
          frames += d.toString().split("\n").filter(Boolean).length;
          if (frames >= 3) child.kill("SIGINT");
        });
      },
    });
    expect(result.code).toBe(0);
    const lines = result.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { at: string; queues: { queue: string; ready: number }[] });
    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(lines[0]!.queues).toEqual([expect.objectContaining({ queue: "watched", ready: 1 })]);
    expect(new Set(lines.map((l) => l.at)).size).toBe(lines.length);
  });

  it("reclaim --lease 0 takes back running jobs", async () => {
    const id = await enqueue("stuck", null, { db: t.db, queue: "reclaim-cli", maxAttempts: 2 });
    await claimJobs(t.db, { queues: ["reclaim-cli"], limit: 1, start: 1, lease: 600, workerId: "gone" });
    const result = await cli(["reclaim", "--lease", "0", "--queue", "reclaim-cli", ...common]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("reclaimed 1 job(s): 1 back to pending");
    expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
  });

  it("doctor names queued tasks that the handlers module does not handle", async () => {
    const handlers = join(dir, "handlers.mjs");
    await writeFile(handlers, "export default { a: () => 1, stuck: () => 2 };\n");
    await enqueue("unknown_task", null, { db: t.db, queue: "doctor" });
    const result = await cli(["doctor", "--handlers", handlers, ...common]);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/PROBLEM queued tasks without a handler in .*: unknown_task \(1\)/);
  });

  it("worker runs a handlers module and stops gracefully on SIGTERM", async () => {
    const handlers = join(dir, "worker-handlers.mjs");
    await writeFile(handlers, "export default { greet: (p) => ({ hello: p.name }) };\n");
    const ids = await Promise.all(["ada", "linus"].map((name) => enqueue("greet", { name }, { db: t.db, queue: "cli-worker" })));
    const result = await cli(["worker", handlers, "--queue", "cli-worker", "--concurrency", "2", "--poll", "0.1", ...common], {
      onStart: (child) => {
        void waitFor(
          "jobs done by the CLI worker",
          async () => {
            const jobs = await Promise.all(ids.map((id) => getJob(id, { db: t.db })));
            return jobs.every((j) => j?.status === "done");
          },
          20_000,
        ).then(() => child.kill("SIGTERM"));
      },
    });
    expect(result.code).toBe(0);
    expect(result.stderr).toContain("SIGTERM: stopping gracefully");
    expect(result.stderr).toContain("worker stopped");
    expect((await getJob(ids[0]!, { db: t.db }))!.result).toEqual({ hello: "ada" });
  });

  it("prune --older-than deletes finished jobs only", async () => {
    const done = await enqueue("p", null, { db: t.db, queue: "prune" });
    const pending = await enqueue("p", null, { db: t.db, queue: "prune", availableIn: 600 });
    await processOne({ p: () => undefined }, { db: t.db, queue: "prune" });
    // Finished two hours ago by the database clock, rather than waiting for its clock to move past `0s`.
    await t.sql(`UPDATE {history} SET finished_at = ${TWO_HOURS_AGO[backend.name]} WHERE id = $1`, [done]);
    const result = await cli(["prune", "--older-than", "0s", ...common]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/deleted [1-9]\d* finished job/);
    expect(await getJob(done, { db: t.db })).toBeNull();
    expect(await getJob(pending, { db: t.db })).not.toBeNull();
  });

  it("prune --status and --batch-size: only the states named, in batches; a bad value is a usage error", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push(await enqueue("p", null, { db: t.db, queue: "prune-status" }));
    for (let i = 0; i < 3; i++) await processOne({ p: () => undefined }, { db: t.db, queue: "prune-status" });
    await t.sql("UPDATE {history} SET status = 'failed' WHERE id = $1", [ids[2]]);
    await t.sql(`UPDATE {history} SET finished_at = ${TWO_HOURS_AGO[backend.name]} WHERE queue = 'prune-status'`);
    expect((await cli(["prune", "--older-than", "0s", "--batch-size", "0", ...common])).code).toBe(2);
    const result = await cli(["prune", "--older-than", "0s", "--status", "done,cancelled", "--batch-size", "1", ...common]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/deleted [1-9]\d* finished job\(s\) older than 0s \(done, cancelled\)/);
    expect(await getJob(ids[0]!, { db: t.db })).toBeNull();
    expect(await getJob(ids[1]!, { db: t.db })).toBeNull();
    expect((await getJob(ids[2]!, { db: t.db }))!.status).toBe("failed");
  });

  // Keyed jobs by SQL until the enqueue option `concurrencyKey` lands.
  async function keyed(key: string, state: "running" | "ready"): Promise<number> {
    const id = await enqueue("k", null, { db: t.db, queue: "cli-limits" });
    await t.sql("UPDATE {jobs} SET concurrency_key = $1 WHERE id = $2", [key, id]);
    if (state === "running") {
      await t.sql(
        `UPDATE {jobs} SET status = 'running', started_at = ${t.db.sql.now}, locked_until = ${t.db.sql.nowPlus("600")}, claim_token = $1 WHERE id = $2`,
        [randomUUID(), id],
      );
    }
    return id;
  }

  it("limits set stores a limit (concurrency, rate N/duration, burst), list shows it, rm removes it", async () => {
    const set = await cli(["limits", "set", "cli:smtp", "--concurrency", "5", "--rate", "14/1", "--burst", "20", ...common]);
    expect(set.stderr).toBe("");
    expect(set.code).toBe(0);
    expect(set.stdout).toBe("limit cli:smtp: 5 at once, 14 per 1 s (burst 20)\n");
    expect((await cli(["limits", "set", "cli:org:*", "--rate", "600/1m", ...common])).code).toBe(0);
    expect((await listLimits({ db: t.db })).filter((l) => l.key.startsWith("cli:"))).toEqual([
      { key: "cli:org:*", concurrency: null, rate: { limit: 600, perSeconds: 60, burst: 600 }, running: 0, throttled: 0 },
      { key: "cli:smtp", concurrency: 5, rate: { limit: 14, perSeconds: 1, burst: 20 }, running: 0, throttled: 0 },
    ]);
    await keyed("cli:smtp", "running");
    const list = await cli(["limits", "list", ...common]);
    expect(list.code).toBe(0);
    const rows = list.stdout
      .trim()
      .split("\n")
      .map((l) => l.trim().split(/\s+/));
    expect(rows[0]).toEqual(["KEY", "RUNNING", "CONCURRENCY", "RATE", "BURST", "THROTTLED"]);
    expect(rows).toContainEqual(["cli:org:*", "0", "-", "600/60s", "600", "0"]);
    expect(rows).toContainEqual(["cli:smtp", "1", "5", "14/1s", "20", "0"]);
    const json = await cli(["limits", "--json", ...common]);
    expect(JSON.parse(json.stdout)).toContainEqual({
      key: "cli:smtp",
      concurrency: 5,
      rate: { limit: 14, perSeconds: 1, burst: 20 },
      running: 1,
      throttled: 0,
    });
    const rm = await cli(["limits", "rm", "cli:org:*", ...common]);
    expect([rm.code, rm.stdout]).toEqual([0, "removed the limit of cli:org:*\n"]);
    const again = await cli(["limits", "rm", "cli:org:*", ...common]);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe("forge-jobs limits: no limit stored for cli:org:*; nothing removed\n");
    expect((await listLimits({ db: t.db })).map((l) => l.key)).not.toContain("cli:org:*");
  });

  it("limits set refuses bad input with one line and exit code 2, writing nothing", async () => {
    const before = await listLimits({ db: t.db });
    const cases: [string[], string][] = [
      [["limits", "set", "bad"], "limits set needs --concurrency <n>, --rate <n>/<duration> or both"],
      [["limits", "set", "bad", "--concurrency=-1"], "--concurrency must be a whole number ≥ 0"],
      [["limits", "set", "bad", "--concurrency", "1.5"], "--concurrency must be a whole number ≥ 0"],
      [["limits", "set", "bad", "--rate", "14"], "--rate must be <jobs>/<duration>"],
      [["limits", "set", "bad", "--rate", "0/1s"], "rate.limit must be an integer from 1"],
      [["limits", "set", "bad", "--rate", "5/0"], "rate.perSeconds must be a number of seconds > 0"],
      [["limits", "set", "bad", "--concurrency", "1", "--burst", "3"], "--burst goes with --rate"],
      [["limits", "set", "a*b", "--concurrency", "1"], 'key "a*b" has a "*" before its end'],
      [["limits", "set", "--concurrency", "1"], "usage: forge-jobs limits set <key>"],
      [["limits", "set", "a", "b", "--concurrency", "1"], "usage: forge-jobs limits set <key> (unexpected"],
      [["limits", "frob"], 'unknown action "frob"'],
      [["limits", "list", "--rat", "1"], "Unknown option '--rat'"],
    ];
    for (const [args, message] of cases) {
      const result = await cli([...args, ...common]);
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(result.stderr, args.join(" ")).toContain(message);
    }
    expect(await listLimits({ db: t.db })).toEqual(before);
  });

  it("groups weight sets a weight and groups list shows it; a bad weight is exit code 2", async () => {
    const set = await cli(["groups", "weight", "cli:acme", "3", ...common]);
    expect([set.code, set.stdout]).toEqual([0, "group cli:acme: weight 3\n"]);
    expect((await listGroups({ db: t.db })).find((g) => g.group === "cli:acme")).toMatchObject({ weight: 3 });
    const list = await cli(["groups", ...common]);
    expect(list.stdout.split("\n")[0]!.trim().split(/\s+/)).toEqual(["GROUP", "WEIGHT", "READY", "RUNNING", "WAIT_P50", "WAIT_P95"]);
    expect(list.stdout).toMatch(/^cli:acme\s+3\s+0\s+0\s+—\s+—$/m);
    for (const weight of ["0", "1.5", "x"]) {
      const bad = await cli(["groups", "weight", "cli:acme", weight, ...common]);
      expect(bad.code, weight).toBe(2);
    }
    expect((await listGroups({ db: t.db })).find((g) => g.group === "cli:acme")).toMatchObject({ weight: 3 });
  });

  it("status shows the limits (running, throttled) and the groups under the queues", async () => {
    await setLimit("st:mail", { concurrency: 1 }, { db: t.db });
    await keyed("st:mail", "running");
    await keyed("st:mail", "ready");
    await keyed("st:mail", "ready");
    await setGroupWeight("st:group", 2, { db: t.db });
    const result = await cli(["status", ...common]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Limits \(/m);
    expect(result.stdout).toMatch(/^st:mail\s+1\s+1\s+-\s+-\s+2$/m);
    expect(result.stdout).toMatch(/^Groups \(/m);
    expect(result.stdout).toMatch(/^st:group\s+2\s+0\s+0\s+—\s+—$/m);
    // --json stays the queues' array that scripts read.
    expect(Array.isArray(JSON.parse((await cli(["status", "--json", ...common])).stdout))).toBe(true);
  });
});
