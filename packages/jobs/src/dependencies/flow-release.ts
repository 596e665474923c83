import type { JobsDatabase } from "../core/database.js";
import { dueAfter } from "../run/due.js";
import type { Executor } from "../db/executor.js";
import { moveEnded } from "../run/ended.js";

/**
 * What happens to the jobs that wait on others when those end: dependents (`dependsOn`) are
 * released, failed or cancelled by their policy, and a batch whose last item ended releases
 * its callback. Called by every write that ends a job (complete, fail for good, cancel, reclaim
 * that fails), inside that write's transaction: a crash commits both or neither. The jobs this
 * ends on the way (dependents failed or cancelled by their policy) leave the live table in it too.
 */

/** A job that has just ended, as the write that ended it read it back. */
export interface EndedJob {
  id: number;
  status: "done" | "failed" | "cancelled";
  /** Some job lists it in its dependsOn (set at that job's enqueue). */
  hasDependents: boolean;
  batchId: number | null;
}

/** Only these need anything done: most jobs have no dependents and no batch. */
export function needsRelease(job: EndedJob): boolean {
  return job.hasDependents || job.batchId !== null;
}

/** `FOR UPDATE` where the backend has row locks (SQLite has one writer: nothing to lock). */
function forUpdate(db: JobsDatabase, of = ""): string {
  if (db.dialect === "sqlite") return "";
  return db.dialect === "postgres" && of ? ` FOR UPDATE OF ${of}` : " FOR UPDATE";
}

interface EdgeRow {
  job_id: number | string;
  depends_on_id: number | string;
  policy: string | null;
  queue: string;
  deps_pending: number | string;
  has_dependents: unknown;
  batch_id: number | string | null;
  holds: unknown;
}

/**
 * Releases, fails or cancels the dependents of `ended`, then the callbacks of the batches they
 * (and the dependents failed or cancelled on the way) belong to. A dependent failed or
 * cancelled by its policy has ended too: its own dependents follow in the next round. Each
 * round only touches `waiting` rows and leaves none waiting that it handled, so the cascade
 * ends within the graph's size.
 */
export async function releaseAfterEnd(db: JobsDatabase, tx: Executor, ended: readonly EndedJob[]): Promise<void> {
  const queues = new Set<string>();
  const batches = new Set<number>();
  const cascaded: number[] = [];
  let round = ended.filter(needsRelease);
  while (round.length > 0) {
    for (const job of round) if (job.batchId !== null) batches.add(job.batchId);
    const parents = round.filter((job) => job.hasDependents);
    round = parents.length === 0 ? [] : await settleDependents(db, tx, parents, queues);
    for (const job of round) cascaded.push(job.id);
  }
  for (const batchId of [...batches].sort((a, b) => a - b)) await finishBatch(db, tx, batchId, queues);
  await moveEnded(db, tx, cascaded);
  await wake(db, tx, queues);
}

/** One round: the waiting dependents of `parents`, each decremented, released, failed or cancelled. Returns those that ended. */
async function settleDependents(db: JobsDatabase, tx: Executor, parents: EndedJob[], queues: Set<string>): Promise<EndedJob[]> {
  const byId = new Map(parents.map((p) => [p.id, p]));
  // Dependents locked in id order (the lock order of every write): their counter is then exact.
  const { rows } = await tx.query<EdgeRow>(
    `SELECT e.job_id, e.depends_on_id, e.holds, j.on_dependency_failure AS policy, j.queue, j.deps_pending, j.has_dependents, j.batch_id
     FROM ${db.dependenciesTable} e JOIN ${db.table} j ON j.id = e.job_id
     WHERE ${db.sql.inList("e.depends_on_id", "$1")} AND j.status = 'waiting'
     ORDER BY e.job_id${forUpdate(db, "j")}`,
    [[...byId.keys()]],
  );
  const dependents = new Map<number, { row: EdgeRow; ended: EndedJob[]; held: number }>();
  for (const row of rows) {
    const id = Number(row.job_id);
    const entry = dependents.get(id) ?? { row, ended: [], held: 0 };
    const parent = byId.get(Number(row.depends_on_id)) as EndedJob;
    entry.ended.push(parent);
    // A holding edge (the "hold" policy, sequences) keeps its dependent waiting on a failure: the edge stays for the retry.
    if (parent.status === "failed" && Boolean(Number(row.holds))) entry.held++;
    dependents.set(id, entry);
  }
  const next: EndedJob[] = [];
  const decrements = new Map<number, number[]>();
  for (const [id, { row, ended, held }] of dependents) {
    const policy = row.policy ?? "fail";
    const broken = ended.find((e) => e.status !== "done");
    if (broken && policy !== "run") {
      const status = policy === "cancel" ? "cancelled" : "failed";
      const message = `dependency ${broken.id} ${broken.status === "failed" ? "failed" : "was cancelled"}; onDependencyFailure is "${policy}"`;
      await tx.query(
        `UPDATE ${db.table} SET status = $2, last_error = $3, deps_pending = 0, finished_at = ${db.sql.now}, updated_at = ${db.sql.now}
         WHERE id = $1 AND status = 'waiting'`,
        [id, status, message],
      );
      next.push({ id, status, hasDependents: Boolean(Number(row.has_dependents)), batchId: row.batch_id === null ? null : Number(row.batch_id) });
      continue;
    }
    const n = ended.length - held;
    if (n === 0) continue;
    decrements.set(n, [...(decrements.get(n) ?? []), id]);
    if (Number(row.deps_pending) <= n) queues.add(row.queue);
  }
  // MariaDB assigns left to right: status and run_at read deps_pending before it changes.
  for (const [n, ids] of decrements) {
    await tx.query(
      `UPDATE ${db.table}
       SET status = CASE WHEN deps_pending <= $2 THEN 'pending' ELSE status END,
           due = ${dueAfter(db, "run_at")},
           run_at = CASE WHEN deps_pending <= $2 AND run_at < ${db.sql.now} THEN ${db.sql.now} ELSE run_at END,
           deps_pending = deps_pending - $2, updated_at = ${db.sql.now}
       WHERE ${db.sql.inList("id", "$1")} AND status = 'waiting'`,
      [ids, n],
    );
  }
  return next;
}

/**
 * Releases a batch's callback once every item has ended — exactly once, without a row that
 * every item's completion writes. Each completion first looks for an unfinished item it can
 * lock (SKIP LOCKED, from the highest id: claims go in id order, so those are the last to be
 * touched): finding one proves it is not the last, since that item cannot end before this
 * transaction commits, and whoever ends it looks again afterwards. Only when every unfinished
 * item is locked by someone else (the end of the batch, or its last few running jobs) does it
 * lock the batch row and count with a fresh read: two completions ending the last two items
 * at once meet there, and the second to get the lock sees the first one's commit.
 */
async function finishBatch(db: JobsDatabase, tx: Executor, batchId: number, queues: Set<string>): Promise<void> {
  const unfinished = `batch_id = $1 AND status IN ('pending', 'running', 'waiting')`;
  const skip = db.dialect === "sqlite" ? "" : " FOR UPDATE SKIP LOCKED";
  const probe = await tx.query(`SELECT id FROM ${db.table} WHERE ${unfinished} ORDER BY id DESC LIMIT 1${skip}`, [batchId]);
  if (probe.rows.length > 0) return;
  const batch = await tx.query<{ callback_id: number | string | null; finished_at: unknown }>(
    `SELECT callback_id, finished_at FROM ${db.batchesTable} WHERE id = $1${forUpdate(db)}`,
    [batchId],
  );
  const row = batch.rows[0];
  if (!row || (row.finished_at !== null && row.finished_at !== undefined)) return;
  // A plain read after the lock, READ COMMITTED (the queue's connections, on PostgreSQL and
  // MariaDB): this statement sees every commit made before the lock was granted.
  const count = await tx.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${db.table} WHERE ${unfinished}`, [batchId]);
  if (Number(count.rows[0]?.n ?? 0) > 0) return;
  await tx.query(`UPDATE ${db.batchesTable} SET finished_at = ${db.sql.now} WHERE id = $1`, [batchId]);
  if (row.callback_id === null) return;
  const released = await tx.query<{ queue: string }>(`SELECT queue FROM ${db.table} WHERE id = $1 AND status = 'waiting'`, [Number(row.callback_id)]);
  await releaseCallback(db, tx, Number(row.callback_id));
  for (const r of released.rows) queues.add(r.queue);
}

/** A batch's callback becomes claimable: the only write that takes it out of `waiting`, besides cancelling it. */
export async function releaseCallback(db: JobsDatabase, tx: Executor, callbackId: number): Promise<void> {
  await tx.query(
    `UPDATE ${db.table} SET status = 'pending', due = ${dueAfter(db, "run_at")}, run_at = CASE WHEN run_at < ${db.sql.now} THEN ${db.sql.now} ELSE run_at END, updated_at = ${db.sql.now}
     WHERE id = $1 AND status = 'waiting'`,
    [callbackId],
  );
}

/** Workers serving the released jobs' queues look now: NOTIFY on PostgreSQL (sent at commit), in-process elsewhere. */
async function wake(db: JobsDatabase, tx: Executor, queues: Set<string>): Promise<void> {
  for (const queue of queues) {
    if (db.dialect === "postgres") await tx.query("SELECT pg_notify($1, $2)", [db.channel, queue]);
    else if (db.executor.notify) db.executor.notify.call(db.executor, db.channel, queue);
  }
}

/**
 * For writes that end jobs without reading them back (fail, cancel, reclaim), in their
 * transaction: reads the ended jobs' flags (rows this transaction already holds), releases what
 * waited on them, then moves them into history (run/ended.ts).
 */
export async function settleEndedIds(db: JobsDatabase, tx: Executor, ids: readonly number[], status: EndedJob["status"]): Promise<void> {
  if (ids.length === 0) return;
  await releaseEndedIds(db, tx, ids, status);
  await moveEnded(db, tx, ids);
}

async function releaseEndedIds(db: JobsDatabase, tx: Executor, ids: readonly number[], status: EndedJob["status"]): Promise<void> {
  const { rows } = await tx.query<{ id: number | string; has_dependents: unknown; batch_id: number | string | null }>(
    `SELECT id, has_dependents, batch_id FROM ${db.table}
     WHERE ${db.sql.inList("id", "$1")} AND (has_dependents OR batch_id IS NOT NULL) ORDER BY id${forUpdate(db)}`,
    [ids],
  );
  if (rows.length === 0) return;
  await releaseAfterEnd(
    db,
    tx,
    rows.map((r) => ({ id: Number(r.id), status, hasDependents: Boolean(Number(r.has_dependents)), batchId: r.batch_id === null ? null : Number(r.batch_id) })),
  );
}
