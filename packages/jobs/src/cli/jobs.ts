import { cancelJob, retryJob } from "../maintenance/admin.js";
import { actOnMatching, bulkFilter, matchingJobIds } from "../maintenance/bulk.js";
import { listJobs, type ListJobsOptions } from "../reads/list.js";
import { getJob } from "../reads/status.js";
import { getJobAttempts } from "../reads/attempts.js";
import type { JobStatus } from "../base/types.js";
import { openDatabase, type Io, type Parsed } from "./commands.js";
import { renderTable } from "./table.js";
import { ProblemsFound, UsageError, parseDuration, parseNumber } from "./usage.js";

/** The filters of list, retry and cancel, from their options. */
function filters(p: Parsed): Omit<ListJobsOptions, "db" | "limit" | "before"> {
  const v = p.values;
  const one = (name: string) => (v[name] as string[] | string | undefined) && ([v[name]].flat()[0] as string);
  return {
    ...(one("queue") ? { queue: one("queue") as string } : {}),
    ...(v.status ? { status: v.status as JobStatus } : {}),
    ...(v.task ? { task: v.task as string } : {}),
    ...(v.tenant ? { tenant: v.tenant as string } : {}),
    ...(v["older-than"] ? { olderThan: parseDuration(v["older-than"] as string, "--older-than") } : {}),
  };
}

/** A job id from the command line: one wording for every way it can be wrong (missing, 0, abc, 1.5). */
function jobId(text: string | undefined, what = "the job id"): number {
  const id = Number(text);
  if (text === undefined || !/^\d+$/.test(text.trim()) || !Number.isSafeInteger(id) || id < 1) {
    throw new UsageError(`${what} must be a positive integer (the ID column of forge-jobs list), got ${JSON.stringify(text ?? "")}`);
  }
  return id;
}

export async function listCommand(p: Parsed, io: Io): Promise<void> {
  const limit = parseNumber(p.values.limit as string | undefined, "--limit", true);
  const before = p.values.before === undefined ? undefined : jobId(p.values.before as string, "--before");
  const db = openDatabase(p, { reading: true });
  try {
    const page = await listJobs({ db, ...filters(p), ...(limit === undefined ? {} : { limit }), ...(before === undefined ? {} : { before }) });
    if (p.values.json) {
      io.out(JSON.stringify(page, null, 2) + "\n");
      return;
    }
    if (page.jobs.length === 0) {
      io.out("no jobs match\n");
      return;
    }
    const rows = page.jobs.map((j) => [
      String(j.id),
      j.queue,
      j.task,
      j.status,
      `${j.attempts}/${j.maxAttempts}`,
      j.tenant ?? "",
      j.createdAt.toISOString(),
      (j.lastError ?? "").split("\n")[0]!.slice(0, 60),
    ]);
    io.out(renderTable(["ID", "QUEUE", "TASK", "STATUS", "ATTEMPTS", "TENANT", "CREATED", "LAST ERROR"], rows));
    if (page.next !== null) io.out(`more: forge-jobs list --before ${page.next} (same filters)\n`);
  } finally {
    await db.close();
  }
}

export async function showCommand(p: Parsed, io: Io): Promise<void> {
  const id = jobId(p.positionals[0]);
  const db = openDatabase(p, { reading: true });
  try {
    const tenant = p.values.tenant ? { tenant: p.values.tenant as string } : {};
    const job = await getJob(id, { db, ...tenant });
    if (!job) throw new ProblemsFound(`no job ${id}`);
    // Each attempt's start, end, worker and error, first to latest (getJobAttempts); getJob has its steps and what it waits for.
    io.out(JSON.stringify({ ...job, attemptHistory: (await getJobAttempts(id, { db, ...tenant })) ?? [] }, null, 2) + "\n");
  } finally {
    await db.close();
  }
}

/** retry and cancel: one id, or every job a filter matches — counted first, acted on with --yes. */
async function bulk(p: Parsed, io: Io, verb: "retry" | "cancel"): Promise<void> {
  const act = verb === "retry" ? retryJob : cancelJob;
  const id = p.positionals.length > 0 ? jobId(p.positionals[0]) : null;
  const db = openDatabase(p);
  try {
    const tenant = p.values.tenant ? { tenant: p.values.tenant as string } : {};
    if (id !== null) {
      if (!(await act(id, { db, ...tenant }))) {
        throw new ProblemsFound(
          `job ${id} was not ${verb === "retry" ? "retried (only failed or cancelled jobs are)" : "cancelled (only pending or running jobs are)"}`,
        );
      }
      io.out(`${verb === "retry" ? "retried" : "cancelled"} job ${id}\n`);
      return;
    }
    const chosen = filters(p);
    // retry --yes alone: every failed job (--status defaults to failed). A bare cancel --yes
    // would cancel every pending job in every queue: that one still asks for a filter.
    const everyFailed = verb === "retry" && p.values.yes === true;
    if (Object.keys(chosen).length === 0 && !everyFailed) {
      throw new UsageError(
        `give a job id, or filters (--status, --queue, --task, --tenant, --older-than) to ${verb} many${verb === "retry" ? ", or --yes to retry every failed job" : ""}`,
      );
    }
    if (!p.values.yes) {
      const ids = await matchingJobIds(db, bulkFilter(verb, chosen));
      io.out(`${ids.length} job(s) match; run again with --yes to ${verb} them\n`);
      return;
    }
    const outcome = await actOnMatching(db, verb, chosen);
    io.out(`${verb === "retry" ? "retried" : "cancelled"} ${outcome.done} of ${outcome.matched} job(s)\n`);
    for (const { id, reason } of outcome.refused) io.err(`job ${id}: ${reason}\n`);
  } finally {
    await db.close();
  }
}

export const retryCommand = (p: Parsed, io: Io) => bulk(p, io, "retry");
export const cancelCommand = (p: Parsed, io: Io) => bulk(p, io, "cancel");
