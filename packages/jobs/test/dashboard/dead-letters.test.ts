// Dead letters on the dashboard: the job list filtered to the dead-letter queue and the letters'
// task shows each letter with the failed job's error; "Retry selected" on letters sends their
// jobs back to their queues and cancels the letters.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEAD_LETTER_TASK, enqueue, getJob, processOne } from "../../src/index.js";
import { createDashboard } from "../../src/dashboard/index.js";
import { backends, uniqueName, type TestDatabase } from "../helpers/backends.js";

const BASE = "/ops/jobs";

describe.each(backends())("the dashboard's dead letters ($name)", (backend) => {
  let t: TestDatabase;
  let server: Server;
  let origin: string;

  beforeAll(async () => {
    t = await backend.create();
    const dashboard = createDashboard({ db: t.db, basePath: BASE, refreshSeconds: 0 });
    server = createServer((req, res) => dashboard(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await t.close();
  });

  it("lists the letters with their errors, and Retry selected sends their jobs back", async () => {
    const queue = uniqueName("dash-dl");
    const dlq = `${queue}-dead`;
    const originals: number[] = [];
    for (const n of [1, 2]) {
      originals.push(await enqueue("charge", { n }, { db: t.db, queue, deadLetter: dlq }));
      await processOne({ charge: () => Promise.reject(new Error(`declined ${n}`)) }, { db: t.db, queue });
    }
    const path = `${BASE}/jobs?queue=${encodeURIComponent(dlq)}&q=${encodeURIComponent(`task:${DEAD_LETTER_TASK}`)}`;
    const response = await fetch(`${origin}${path}`);
    const body = await response.text();
    const letters = [...body.matchAll(/<tr id="job-(\d+)"/g)].map((m) => Number(m[1])).sort((a, b) => a - b);
    expect(letters).toHaveLength(2);
    expect(body).toContain("declined 1");
    expect(body).toContain("declined 2");
    const cookie = /forge_jobs_csrf=[^;,]+/.exec(response.headers.get("set-cookie") ?? "")![0];
    const csrf = /name="csrf" value="([^"]+)"/.exec(body)![1]!;

    const posted = await fetch(`${origin}${BASE}/selected`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: new URLSearchParams([["csrf", csrf], ["verb", "retry"], ...letters.map((id): [string, string] => ["id", String(id)])]).toString(),
    });
    expect(posted.status).toBe(303);
    expect(/forge_jobs_notice=([^;]+)/.exec(posted.headers.get("set-cookie")!)![1]).toBe("selected-retried.2.2");
    for (const id of letters) expect((await getJob(id, { db: t.db }))!.status).toBe("cancelled");
    for (const id of originals) expect((await getJob(id, { db: t.db }))!.status).toBe("failed");
    const back = await t.sql<{ payload: unknown }>("SELECT payload FROM {jobs} WHERE queue = $1 AND task = 'charge' AND status = 'pending' ORDER BY id", [
      queue,
    ]);
    expect(back.map((r) => t.db.sql.readJson(r.payload))).toEqual([{ n: 1 }, { n: 2 }]);
  });
});
