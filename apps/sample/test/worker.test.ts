import { enqueue, getJob } from "@forge/jobs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEnv, spawnWorker, startApp, startSmtp, waitFor, type Env, postgresOn } from "./support.js";

describe.skipIf(!postgresOn)("src/worker.ts as a process (postgres)", () => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;

  beforeAll(async () => {
    env = await createEnv("postgres");
    server = await startApp(env);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
  });

  async function sendOne(campaign: string): Promise<number> {
    const response = await fetch(`${server.url}/orgs/acme/campaigns/${campaign}/send`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ subject: campaign, text: "x", recipients: [{ email: "slow@example.org" }] }),
    });
    return ((await response.json()) as { jobIds: number[] }).jobIds[0]!;
  }

  /**
   * A worker process caught mid-send: the SMTP server holds its reply until `release()`, and
   * the worker has been sent one SIGTERM (and said so).
   */
  async function midSendAfterSigterm(campaign: string) {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let receiving!: () => void;
    const inSend = new Promise<void>((resolve) => (receiving = resolve));
    const smtp = await startSmtp({ beforeAccept: () => (receiving(), held) });
    const worker = spawnWorker(env, smtp.url);
    const cleanup = async () => {
      release();
      worker.child.kill("SIGKILL");
      await smtp.close();
    };
    try {
      const id = await sendOne(campaign);
      await inSend;
      worker.child.kill("SIGTERM");
      await waitFor("the worker to acknowledge SIGTERM", async () => worker.output.join("").includes("SIGTERM: finishing running jobs"));
      return { id, smtp, worker, release, cleanup };
    } catch (error) {
      await cleanup();
      throw error;
    }
  }

  it("on SIGTERM, finishes the mail it is sending, then exits 0", async () => {
    const { id, smtp, worker, release, cleanup } = await midSendAfterSigterm("graceful");
    try {
      expect(worker.child.exitCode).toBeNull();
      release();
      expect(await worker.exited).toBe(0);
      expect(await getJob(id, { db: env.db.jobs })).toMatchObject({ status: "done", attempts: 1 });
      expect(smtp.messages).toHaveLength(1);
    } finally {
      await cleanup();
    }
  });

  it("a second SIGTERM exits at once, mid-send", async () => {
    const { id, worker, cleanup } = await midSendAfterSigterm("impatient");
    try {
      const t = Date.now();
      worker.child.kill("SIGTERM");
      expect(await worker.exited).toBe(1);
      expect(Date.now() - t).toBeLessThan(2000);
      expect(worker.output.join("")).toContain("second SIGTERM: exiting now");
      // Never completed: the job's lease runs out and another worker will take it over.
      expect((await getJob(id, { db: env.db.jobs }))?.status).toBe("running");
    } finally {
      await cleanup();
    }
  });

  it("logs one JSON line per event through pino; a failed attempt is one line, without its stack (issue 16.14)", async () => {
    const smtp = await startSmtp();
    const worker = spawnWorker(env, smtp.url);
    try {
      const ok = await sendOne("logged");
      // A task this worker has no handler for: the attempt fails, for good.
      const bad = await enqueue("no-such-task", { n: 1 }, { db: env.db.jobs, queue: "mails", maxAttempts: 3 });
      await waitFor("both jobs to end", async () => {
        const [a, b] = [await getJob(ok, { db: env.db.jobs }), await getJob(bad, { db: env.db.jobs })];
        return a?.status === "done" && b?.status === "failed";
      });
      worker.child.kill("SIGTERM");
      expect(await worker.exited).toBe(0);
      const lines = worker.output
        .join("")
        .split("\n")
        .filter((line) => line !== "");
      const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      for (const r of records) expect(r).toMatchObject({ process: "worker", level: expect.any(Number), time: expect.any(Number), msg: expect.any(String) });
      const failures = records.filter((r) => r.jobId === bad);
      expect(failures.map((r) => [r.level, r.attempt, r.willRetry])).toEqual([[40, 1, false]]);
      for (const failure of failures) expect(failure.err).toMatch(/^\w*Error: no handler for task "no-such-task"; this worker handles [^\n]+$/);
      expect(lines.join("\n")).not.toMatch(/\\n\s+at /);
      expect(records.filter((r) => r.jobId === ok).map((r) => r.msg)).toEqual([`job ${ok} done`]);
    } finally {
      worker.child.kill("SIGKILL");
      await smtp.close();
    }
  });

  it("refuses to start without SMTP_URL, saying so", async () => {
    const worker = spawnWorker(env, undefined);
    expect(await worker.exited).toBe(1);
    expect(worker.output.join("")).toContain("SMTP_URL is not set");
  });
});
