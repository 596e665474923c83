import { rm } from "node:fs/promises";
import path from "node:path";
import type { Logger, WorkerEventHandlers } from "@forge/jobs";
import { IMPORT_JOB_TASK } from "@forge/import-export";
import type { AppConfig } from "./config.js";
import type { AppDatabase } from "./db.js";
import { uploadsDir } from "./handlers.js";

/**
 * An uploaded CSV is kept only while its import may still read it: once the import job ends —
 * done, or failed for good (no retry left, or a failure no retry can fix) — the worker deletes
 * the file. Retries keep it (the next attempt reads it again). The file's path comes from the
 * `imports` row written with the job, never from the payload. A cancelled import's file is not
 * deleted (cancelling runs no worker code): see the README's "Uploads" for where it stays.
 */
export function uploadCleanup(db: AppDatabase, config: Pick<AppConfig, "dataDir">, log: Logger): Pick<WorkerEventHandlers, "job:succeeded" | "job:failed"> {
  const remove = (jobId: number, outcome: "done" | "failed") => {
    void removeUpload(db, config, jobId).then(
      (file) => file && log.info({ jobId, file, outcome }, `import ${outcome}: upload deleted`),
      (error: unknown) => log.warn({ jobId, err: error instanceof Error ? error.message : String(error) }, "could not delete an ended import's upload"),
    );
  };
  return {
    "job:succeeded": ({ job }) => {
      if (job.task === IMPORT_JOB_TASK) remove(job.id, "done");
    },
    "job:failed": ({ job, willRetry }) => {
      if (job.task === IMPORT_JOB_TASK && !willRetry) remove(job.id, "failed");
    },
  };
}

/** Deletes the upload of the import run by job `jobId`; its path under data/uploads/, or null when there is no import row. */
export async function removeUpload(db: AppDatabase, config: Pick<AppConfig, "dataDir">, jobId: number): Promise<string | null> {
  const { rows } = await db.sql.query<{ file: string }>(`SELECT file FROM ${db.imports} WHERE job_id = $1`, [jobId]);
  const file = rows[0]?.file;
  if (!file) return null;
  const root = uploadsDir(config);
  const target = path.resolve(root, file);
  // The row was written by the import route (<org>/<uuid>.csv); still, never outside uploads/.
  if (!target.startsWith(`${root}${path.sep}`)) throw new Error(`import of job ${jobId}: file ${JSON.stringify(file)} is not under the uploads folder`);
  await rm(target, { force: true });
  return file;
}
