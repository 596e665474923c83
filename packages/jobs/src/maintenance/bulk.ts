import { cancelJob, retryJob } from "./admin.js";
import type { JobsDatabase } from "../core/database.js";
import { listJobs, type ListJobsOptions } from "../reads/list.js";

// Retry or cancel every job a filter matches: the one path of the CLI's `retry`/`cancel`
// with filters and the dashboard's bulk forms. The ids come from listJobs (the same filters,
// paged), then each goes through retryJob / cancelJob, which re-check the job's status: a job
// that changed meanwhile is left alone, never acted on outside the filter.

export type BulkVerb = "retry" | "cancel";
export type BulkFilter = Omit<ListJobsOptions, "db" | "limit" | "before">;

export interface BulkOutcome {
  /** Jobs the filter matched when they were listed. */
  matched: number;
  /** Jobs retried or cancelled. */
  done: number;
  /** Jobs the action refused with an error (a retry whose dedup key another job holds). */
  refused: { id: number; reason: string }[];
}

/** The filter a bulk action runs with: without a status, retry takes the failed jobs and cancel the pending ones. */
export function bulkFilter(verb: BulkVerb, filter: BulkFilter): BulkFilter {
  return { ...filter, status: filter.status ?? (verb === "retry" ? "failed" : "pending") };
}

/** Every id the filter matches, newest first (listJobs page by page). */
export async function matchingJobIds(db: JobsDatabase, filter: BulkFilter): Promise<number[]> {
  const ids: number[] = [];
  let before: number | undefined;
  for (;;) {
    const page = await listJobs({ db, ...filter, limit: 500, ...(before === undefined ? {} : { before }) });
    ids.push(...page.jobs.map((j) => j.id));
    if (page.next === null) return ids;
    before = page.next;
  }
}

/** Retries or cancels the jobs `filter` matches (see `bulkFilter` for its default status), each within `filter.tenant`. */
export async function actOnMatching(db: JobsDatabase, verb: BulkVerb, filter: BulkFilter): Promise<BulkOutcome> {
  const chosen = bulkFilter(verb, filter);
  const ids = await matchingJobIds(db, chosen);
  const act = verb === "retry" ? retryJob : cancelJob;
  const tenant = chosen.tenant === undefined ? {} : { tenant: chosen.tenant };
  const outcome: BulkOutcome = { matched: ids.length, done: 0, refused: [] };
  for (const id of ids) {
    try {
      if (await act(id, { db, ...tenant })) outcome.done++;
    } catch (error) {
      outcome.refused.push({ id, reason: error instanceof Error ? error.message : String(error) });
    }
  }
  return outcome;
}
