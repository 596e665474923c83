import type { IncomingMessage, ServerResponse } from "node:http";
import type { JobsDatabase } from "../core/database.js";
import type { Job } from "../base/types.js";
import { getJob } from "../reads/status.js";
import { SECURITY_HEADERS, sendError } from "./http.js";

/** What one event tells a watcher of a job: enough for a progress bar and its verdict. */
function snapshot(job: Job): string {
  const { id, status, liveProgress, attempts, maxAttempts, result, lastError } = job;
  const ended = status === "done" || status === "failed" || status === "cancelled";
  return JSON.stringify({ id, status, liveProgress, attempts, maxAttempts, ...(ended ? { result, lastError } : {}) });
}

/** A comment line now and then keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

/**
 * `GET /jobs/:id/events`: a job's status and live progress as Server-Sent Events, read every
 * `intervalMs` (the pace progress is written). `event: job` whenever what it shows changed, then one `event: end`
 * when the job has ended, and the stream closes. Scoped like the job's page: another tenant's
 * job, or a missing one, is a 404 before anything is streamed. Reads the primary, not the
 * replica: a watcher wants the latest value.
 */
export async function streamJobEvents(
  req: IncomingMessage,
  res: ServerResponse,
  db: JobsDatabase,
  id: number,
  tenant: string | null,
  intervalMs: number,
): Promise<void> {
  const read = () => getJob(id, { db, ...(tenant === null ? {} : { tenant }) });
  let job = await read();
  if (!job) return sendError(res, 404, "Not Found", `No job #${id}.`);
  res.writeHead(200, { ...SECURITY_HEADERS, "Content-Type": "text/event-stream; charset=utf-8", "X-Accel-Buffering": "no" });
  if (req.method === "HEAD") return void res.end();
  let open = true;
  req.on("close", () => (open = false));
  let last = "";
  let quietSince = Date.now();
  while (open && job) {
    const data = snapshot(job);
    const ended = job.status === "done" || job.status === "failed" || job.status === "cancelled";
    if (data !== last || ended) {
      res.write(`event: ${ended ? "end" : "job"}\ndata: ${data}\n\n`);
      last = data;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= KEEPALIVE_MS) {
      res.write(": still running\n\n");
      quietSince = Date.now();
    }
    if (ended) break;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
    if (open) job = await read();
  }
  // A job deleted while watched (an operator's prune): the stream just ends.
  res.end();
}
