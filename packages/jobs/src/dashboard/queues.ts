import type { QueueStatus } from "../base/types.js";
import { html, type Html } from "./escape.js";

// A queue's state on the overview, and its pause / resume form (queue-actions.ts answers it).

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
