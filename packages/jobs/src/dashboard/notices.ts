/**
 * The notices a dashboard action leaves for the page it redirects to (`?notice=<kind>-<id>`):
 * their kinds, and what each says. Apart from the page, so the action handlers (schedules.ts,
 * http.ts) can name one without importing the page that renders them.
 */
export type Notice =
  | "retried"
  | "not-retried"
  | "retry-held"
  | "cancelled"
  | "not-cancelled"
  | "schedule-paused"
  | "schedule-resumed"
  | "schedule-triggered"
  | "schedule-missing"
  | "queue-paused"
  | "queue-already-paused"
  | "queue-resumed"
  | "bulk-retried"
  | "bulk-cancelled"
  | "selected-retried"
  | "selected-cancelled"
  | "selected-none";
export const NOTICES: readonly Notice[] = [
  "selected-retried",
  "selected-cancelled",
  "selected-none",
  "bulk-retried",
  "bulk-cancelled",
  "retried",
  "not-retried",
  "retry-held",
  "cancelled",
  "not-cancelled",
  "schedule-paused",
  "schedule-resumed",
  "schedule-triggered",
  "schedule-missing",
  "queue-paused",
  "queue-already-paused",
  "queue-resumed",
];

/** The ids a selection action left alone, as a notice names them. */
function refusedIds(refused: readonly number[]): string {
  return refused.map((id) => `#${id}`).join(", ");
}

/**
 * What each notice says; `id` is the job (or the count of a bulk action, of `of` matching), and
 * `refused` the selected jobs an action on a selection left alone.
 */
export const NOTICE_TEXT: Record<Notice, (id: number, of: number, refused: readonly number[]) => string> = {
  "selected-retried": (n, of, refused) =>
    `${n} of ${of} selected job(s) are back in their queues.${refused.length > 0 ? ` Not retried: ${refusedIds(refused)} — only failed or cancelled jobs can be retried, and not while another pending or running job holds their dedup key.` : ""}`,
  "selected-cancelled": (n, of, refused) =>
    `${n} of ${of} selected job(s) were cancelled.${refused.length > 0 ? ` Not cancelled: ${refusedIds(refused)} — only pending, waiting or running jobs can be cancelled.` : ""}`,
  "selected-none": () => "No job was selected: tick the jobs to act on, then press the button.",
  "bulk-retried": (n, of) =>
    `${n} of ${of} matching job(s) are back in their queues${n < of ? " (the others were no longer failed or cancelled, or another job holds their dedup key)" : ""}.`,
  "bulk-cancelled": (n, of) => `${n} of ${of} matching job(s) were cancelled${n < of ? " (the others were no longer pending or running)" : ""}.`,
  retried: (id) => `Job #${id} is back in its queue.`,
  "not-retried": (id) => `Job #${id} was not retried: it is no longer failed or cancelled.`,
  "retry-held": (id) => `Job #${id} was not retried: another pending or running job holds its dedup key. Cancel that one or wait until it ends.`,
  cancelled: (id) => `Job #${id} was cancelled.`,
  "not-cancelled": (id) => `Job #${id} was not cancelled: it is no longer pending or running.`,
  "schedule-paused": () => "The schedule is paused; its pending runs are cancelled.",
  "schedule-resumed": () => "The schedule is resumed from its next slot.",
  "schedule-triggered": (id) => `Job #${id} is enqueued: one run of the schedule, now.`,
  "schedule-missing": () => "No such schedule: it was removed meanwhile.",
  "queue-paused": () => "The queue is paused: its running jobs finish, and no worker starts another of its jobs until it is resumed.",
  "queue-already-paused": () => "The queue was already paused.",
  "queue-resumed": () => "The queue is resumed: workers take its jobs again.",
};
