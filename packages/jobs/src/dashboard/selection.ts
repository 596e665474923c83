import type { JobsDatabase } from "../core/database.js";
import { JobError } from "../base/errors.js";
import { cancelJob, retryJob } from "../maintenance/admin.js";
import { getJob } from "../reads/status.js";
import { DEAD_LETTER_TASK, redriveDeadLetter } from "../run/dead-letter.js";
import type { BulkVerb } from "../maintenance/bulk.js";

// "Retry selected" / "Cancel selected" on the job list: the ids the operator ticked, each acted on
// through retryJob / cancelJob (the path of a job's own button), each checked again as it goes.

/** At most this many ids per post: a list page holds at most 100 rows. */
export const MAX_SELECTED = 100;
const ID = /^[1-9]\d{0,14}$/;

/** What an action on a selection did: `done` of `of` selected, and the ids it left alone. */
export interface SelectionOutcome {
  verb: BulkVerb;
  done: number;
  of: number;
  refused: number[];
}

/** The verb and ids of a selection form; a JobError (a 400 that says why) for anything else. */
export function readSelection(form: URLSearchParams): { verb: BulkVerb; ids: number[] } {
  const verb = form.get("verb");
  if (verb !== "retry" && verb !== "cancel") {
    throw new JobError(`verb must be "retry" or "cancel" (the form's two buttons), got ${JSON.stringify(verb)}`, "verb");
  }
  const texts = form.getAll("id");
  const bad = texts.find((text) => !ID.test(text));
  if (bad !== undefined) throw new JobError(`id must be a job id (a whole number from 1), got ${JSON.stringify(bad)}`, "id");
  const ids = [...new Set(texts.map(Number))];
  if (ids.length > MAX_SELECTED) throw new JobError(`select at most ${MAX_SELECTED} jobs at once, got ${ids.length}`, "id");
  return { verb, ids };
}

/**
 * Retries or cancels each selected job, inside the dashboard's tenant when it has one. A job
 * no longer in a state the action applies to (or another tenant's, or whose dedup key another
 * active job holds) is left alone and named in `refused`.
 */
export async function actOnSelection(db: JobsDatabase, verb: BulkVerb, ids: readonly number[], tenant: string | null): Promise<SelectionOutcome> {
  const scoped = tenant === null ? {} : { tenant };
  const refused: number[] = [];
  for (const id of ids) {
    const acted =
      verb === "retry"
        ? await retryOne(db, id, tenant).catch((error: unknown) => {
            // The id is a valid one: a JobError can only say that its dedup key is held.
            if (error instanceof JobError) return false;
            throw error;
          })
        : await cancelJob(id, { db, ...scoped });
    if (!acted) refused.push(id);
  }
  return { verb, done: ids.length - refused.length, of: ids.length, refused };
}

/**
 * Retrying a dead letter (a pending `DEAD_LETTER_TASK` job) sends its job back to its queue,
 * as a new job, and cancels the letter (run/dead-letter.ts); any other job is retried itself.
 */
async function retryOne(db: JobsDatabase, id: number, tenant: string | null): Promise<boolean> {
  const scoped = tenant === null ? {} : { tenant };
  const job = await getJob(id, { db, ...scoped });
  if (job?.task === DEAD_LETTER_TASK) return job.status === "pending" && (await redriveDeadLetter(db, id, tenant));
  return retryJob(id, { db, ...scoped });
}
