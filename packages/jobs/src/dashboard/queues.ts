import type { IncomingMessage, ServerResponse } from "node:http";
import type { QueueStatus } from "../base/types.js";
import type { JobsDatabase } from "../core/database.js";
import { pauseQueue, resumeQueue } from "../maintenance/pause.js";
import type { Csrf } from "./csrf.js";
import { html, type Html } from "./escape.js";
import { checkedForm, redirectWithNotice } from "./http.js";

// A queue's state on the overview, and its pause / resume form: a POST with the CSRF token,
// answered with a 303 back to the overview. Only on a dashboard of every tenant: a pause holds
// back the whole queue's jobs.

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

export interface QueueForms {
  basePath: string;
  csrfToken: string;
}

/** The state cell of a queue's row and, given `forms`, the cell of its pause or resume button. */
export function queueStateCells(q: QueueStatus, forms: QueueForms | null): Html {
  const verb = q.paused ? "resume" : "pause";
  const button = forms
    ? html`<td><form method="post" action="${forms.basePath}/queues/${encodeURIComponent(q.queue)}/${verb}"><input type="hidden" name="csrf" value="${forms.csrfToken}"><button type="submit" data-action="${verb}" data-queue="${q.queue}">${q.paused ? "Resume" : "Pause"}</button></form></td>`
    : html``;
  return html`<td data-state="${q.paused ? "paused" : "active"}">${q.paused ? html`<strong class="bad">paused</strong>` : "active"}</td>${button}`;
}
