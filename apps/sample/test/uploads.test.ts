import { access } from "node:fs/promises";
import path from "node:path";
import { getJob, runWorker, type Logger } from "@forge/jobs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHandlers, QUEUES } from "../src/handlers.js";
import { uploadCleanup } from "../src/uploads.js";
import { backendNames, createEnv, csvUpload, startApp, waitFor, type Env } from "./support.js";

// Issue 16.18 (the sample's part): an uploaded CSV is deleted once its import ends, done or
// failed for good; a failed attempt with a retry left keeps it for the retry.

const names = await backendNames();
const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

describe.each(names)("uploads are deleted when their import ends (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  const lines: { level: string; fields: Record<string, unknown>; msg?: string }[] = [];
  const logger = Object.fromEntries(
    (["debug", "info", "warn", "error"] as const).map((level) => [
      level,
      (fields: object, msg?: string) => lines.push({ level, fields: fields as Record<string, unknown>, msg }),
    ]),
  ) as unknown as Logger;

  beforeAll(async () => {
    env = await createEnv(name);
    server = await startApp(env);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
  });

  async function upload(org: string): Promise<{ jobId: number; file: string }> {
    const response = await fetch(`${server.url}/orgs/${org}/imports`, { method: "POST", body: csvUpload("email,name,age\nada@example.org,Ada,36\n") });
    expect(response.status).toBe(202);
    const { jobId, importId } = (await response.json()) as { jobId: number; importId: string };
    const file = path.join(env.config.dataDir, "uploads", org, `${importId}.csv`);
    expect(await exists(file)).toBe(true);
    return { jobId, file };
  }

  /** The sample's worker, with the same upload cleanup as src/worker.ts, until `done` holds. */
  async function work(until: () => Promise<boolean>, what: string): Promise<void> {
    const stop = new AbortController();
    const handlers = createHandlers({ ...env.config, smtpUrl: "smtp://127.0.0.1:9" }, env.db);
    const running = runWorker(handlers, {
      queue: [QUEUES.imports],
      db: env.db.jobs,
      signal: stop.signal,
      pollInterval: 0.05,
      events: uploadCleanup(env.db, env.config, logger),
    });
    try {
      await waitFor(what, async () => until());
    } finally {
      stop.abort();
      await running;
    }
  }

  it("deletes the file once the import is done", async () => {
    const { jobId, file } = await upload("done-org");
    await work(async () => !(await exists(file)), "the upload to be deleted");
    expect((await getJob(jobId, { db: env.db.jobs }))?.status).toBe("done");
    expect(lines.find((l) => l.fields.jobId === jobId)).toMatchObject({ level: "info", fields: { outcome: "done" } });
  });

  it("keeps the file while a retry is left, deletes it when the import fails for good", async () => {
    const { jobId, file } = await upload("failing-org");
    // An importer no worker knows: every attempt fails (a retryable failure), two attempts allowed.
    const table = env.db.jobs.table;
    const setImporter = name === "postgres" ? `payload = jsonb_set(payload, '{importer}', '"nope"')` : `payload = json_set(payload, '$.importer', 'nope')`;
    await env.db.sql.query(`UPDATE ${table} SET ${setImporter}, max_attempts = 2 WHERE id = $1`, [jobId]);

    await work(async () => {
      const job = await getJob(jobId, { db: env.db.jobs });
      return job?.status === "pending" && job.attempts === 1 && job.lastError !== null;
    }, "the first attempt's failure");
    const first = await getJob(jobId, { db: env.db.jobs });
    expect(first?.status).toBe("pending");
    expect(first?.lastError).toContain('unknown importer "nope"');
    expect(await exists(file)).toBe(true);

    // The retry now, not after its backoff.
    await env.db.sql.query(`UPDATE ${table} SET run_at = created_at WHERE id = $1`, [jobId]);
    await work(async () => !(await exists(file)), "the upload to be deleted");
    expect((await getJob(jobId, { db: env.db.jobs }))?.status).toBe("failed");
    expect(lines.find((l) => l.fields.jobId === jobId)).toMatchObject({ level: "info", fields: { outcome: "failed" } });
  });
});
