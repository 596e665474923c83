import type { IncomingMessage, ServerResponse } from "node:http";
import type { JobsDatabase } from "../core/database.js";
import { pauseQueue, resumeQueue } from "../maintenance/pause.js";
import type { Csrf } from "./csrf.js";
import { checkedForm, redirectWithNotice } from "./http.js";

// A queue's pause / resume form: a POST with the CSRF token, answered with a 303 back to the
// overview. Only on a dashboard of every tenant: a pause holds back the whole queue's jobs.

/** Pauses or resumes `queue` from a checked form; back to the overview with its notice. */
export async function actOnQueue(
  req: IncomingMessage,
  res: ServerResponse,
  at: { db: JobsDatabase; csrf: Csrf; basePath: string },
  queue: string,
  verb: "pause" | "resume",
): Promise<void> {
  const form = await checkedForm(req, res, at.csrf);
  if (form === null) return;
  const changed = verb === "pause" ? await pauseQueue(queue, { db: at.db }) : await resumeQueue(queue, { db: at.db });
  redirectWithNotice(res, at.basePath, at.basePath, verb === "pause" ? (changed ? "queue-paused" : "queue-already-paused") : "queue-resumed", 0);
}
