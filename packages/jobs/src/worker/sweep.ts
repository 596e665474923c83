import type { JobsDatabase } from "../core/database.js";
import type { WorkerEmitter } from "../core/events.js";
import type { Logger } from "../base/logger.js";
import { reclaimJobs } from "../maintenance/reclaim.js";
import { endTimedOutWaits } from "../events/wait-timeouts.js";
import { agePendingJobs } from "../maintenance/age-priorities.js";

/**
 * A worker's sweep: takes back every job whose worker was lost (its lease ran out), as
 * `reclaim()` does, and says so for each. Any worker may do it for all of them: the reclaim
 * is one fenced write, so two sweeps at once take each job once. It also ends the event waits
 * whose timeout passed (events/wait-timeouts.ts), and raises the priority of aging jobs
 * (maintenance/age-priorities.ts).
 */
export async function sweepLostJobs(db: JobsDatabase, emitter: WorkerEmitter, logger: Logger): Promise<void> {
  for (const job of await reclaimJobs(db, null, null)) {
    emitter.emit("job:reclaimed", { job });
    logger.warn({ jobId: job.id, task: job.task, queue: job.queue, attempt: job.attempts, status: job.status }, `job ${job.id} reclaimed from a lost worker`);
  }
  await endTimedOutWaits(db);
  await agePendingJobs(db);
}
