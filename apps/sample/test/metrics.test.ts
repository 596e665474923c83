// Prometheus (issue 36.8): the web process and the worker, run as processes as `pnpm start` and
// `pnpm worker` run them, each serve /metrics in the Prometheus text format.
import { spawn } from "node:child_process";
import path from "node:path";
import { enqueue, getJob } from "@forge/jobs";
import { afterAll, describe, expect, it } from "vitest";
import { APP_DIR } from "../src/config.js";
import { backendNames, createEnv, freePort, spawnWorker, startSmtp, waitFor, type Env } from "./support.js";

function startWeb(env: Env) {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(APP_DIR, "src", "server.ts")], {
    cwd: APP_DIR,
    env: { ...process.env, DATABASE_URL: env.config.databaseUrl, DATABASE_SCHEMA: env.config.databaseSchema ?? "", DATA_DIR: env.config.dataDir, PORT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) stream.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
  return { child, text: () => output };
}

/** The value of the sample of `name` whose labels include every one of `labels`, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}

const names = await backendNames();

describe.each(names)("/metrics of the web process and the worker (%s)", (name) => {
  const cleanups: (() => unknown)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it("a run's counters and histograms on the worker's, the enqueues and the queues' depth on the web's", async () => {
    const env = await createEnv(name);
    cleanups.push(() => env.close());
    const smtp = await startSmtp();
    cleanups.push(() => smtp.close());
    const metricsPort = await freePort();
    const worker = spawnWorker(env, smtp.url, { METRICS_PORT: String(metricsPort) });
    cleanups.push(() => worker.child.kill("SIGKILL"));
    const web = startWeb(env);
    cleanups.push(() => web.child.kill("SIGKILL"));
    const url = await waitFor("the web process listening", async () => /listening at (http:\/\/127\.0\.0\.1:\d+)/i.exec(web.text())?.[1], 30_000);
    await waitFor("the worker's metrics endpoint", async () => worker.output.join("").includes(`/metrics`), 30_000);

    const sent = await fetch(`${url}/orgs/acme/campaigns/metrics/send`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ subject: "Metrics", text: "x", recipients: [{ email: "ada@example.org" }, { email: "bob@example.org" }] }),
    });
    expect(sent.status).toBe(202);
    const ids = ((await sent.json()) as { jobIds: number[] }).jobIds;
    // A task no handler knows fails for good; a queue no worker serves keeps its job ready.
    const bad = await enqueue("no-such-task", {}, { db: env.db.jobs, queue: "mails" });
    await enqueue("parked-task", {}, { db: env.db.jobs, queue: "parked" });
    await waitFor("the runs to end", async () => {
      const jobs = await Promise.all([...ids, bad].map((id) => getJob(id, { db: env.db.jobs })));
      return jobs.every((job) => job?.status === "done" || job?.status === "failed");
    });

    // The counters are added after the completion is written: poll the endpoint, do not sleep.
    const workerText = await waitFor("the worker's counters", async () => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      return sample(text, "forge_jobs_failed_total", { forge_jobs_will_retry: "false" }) === 1 && text;
    });
    const mails = { forge_jobs_queue: "mails", forge_jobs_task: "forge.mail.send" };
    expect(sample(workerText, "forge_jobs_succeeded_total", mails)).toBe(2);
    expect(sample(workerText, "forge_jobs_failed_total", { forge_jobs_queue: "mails", forge_jobs_task: "no-such-task", forge_jobs_will_retry: "false" })).toBe(
      1,
    );
    expect(sample(workerText, "forge_jobs_wait_duration_count", mails)).toBe(2);
    expect(sample(workerText, "forge_jobs_execution_duration_count", mails)).toBe(2);
    expect(sample(workerText, "forge_jobs_execution_duration_sum", mails)).toBeGreaterThan(0);
    expect(workerText).toContain("# TYPE forge_jobs_succeeded_total counter");

    const webResponse = await fetch(`${url}/metrics`);
    expect(webResponse.status).toBe(200);
    expect(webResponse.headers.get("content-type")).toMatch(/^text\/plain/);
    const webText = await webResponse.text();
    expect(sample(webText, "forge_jobs_enqueued_total", mails)).toBe(2);
    expect(sample(webText, "forge_jobs_queue_ready", { forge_jobs_queue: "parked" })).toBe(1);
    expect(sample(webText, "forge_jobs_queue_ready", { forge_jobs_queue: "mails" })).toBe(0);
    expect(sample(webText, "forge_jobs_queue_oldest_ready_age", { forge_jobs_queue: "parked" })).toBeGreaterThanOrEqual(0);
    expect(webText).toContain("# TYPE forge_jobs_queue_ready gauge");
  });
});
