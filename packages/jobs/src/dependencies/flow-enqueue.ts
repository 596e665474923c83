import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { JobError } from "../base/errors.js";
import type { FlowItem, FlowPlan } from "./flow-spec.js";
import type { NewJob } from "../enqueue/new-job.js";
import { valuesList } from "../core/sql.js";
import { moveEnded, whileEnding } from "../run/ended.js";

/** Inserts checked jobs inside the caller's transaction, ids in input order (enqueue.ts's chunked insert). */
export type InsertJobs = (tx: Executor, jobs: NewJob[]) => Promise<number[]>;

type State = { status: "pending" | "waiting"; depsPending: number } | { status: "failed" | "cancelled"; error: string };

const FINISHED_BADLY = new Set(["failed", "cancelled"]);
const EDGES_PER_STATEMENT = 500;

/**
 * Writes a flow in one transaction (the caller's, when `db` is a client inside one): locks the
 * existing jobs named (so none ends unseen between this read and the commit: its completion
 * then finds has_dependents set and releases the new job), checks they exist in the same
 * tenant, inserts the jobs, sets each one's state from its dependencies' (waiting with a count
 * of unfinished ones; pending when all are done; failed or cancelled at once, by its policy,
 * when one already failed or was cancelled), and writes the edges. A JobError rolls it all back.
 */
export async function insertFlow(
  db: JobsDatabase,
  jobs: NewJob[],
  plan: FlowPlan,
  insert: InsertJobs,
  field: (i: number, name: string) => string,
): Promise<number[]> {
  checkLocalTenants(jobs, plan, field);
  // A job whose dependency already failed or was cancelled ends at its enqueue: history must be able to take it.
  return whileEnding(db, () => writeFlow(db, jobs, plan, insert, field));
}

function writeFlow(db: JobsDatabase, jobs: NewJob[], plan: FlowPlan, insert: InsertJobs, field: (i: number, name: string) => string): Promise<number[]> {
  return db.executor.transaction(async (tx) => {
    const existing = await lockExisting(db, tx, plan.existingIds);
    plan.items.forEach((item, i) => {
      for (const id of item.existing) {
        const found = existing.get(id);
        const tenant = (jobs[i] as NewJob).tenant;
        if (!found || found.tenant !== tenant) {
          throw new JobError(
            `${field(i, "dependsOn")} names job ${id}, which does not exist${tenant === null ? "" : ` for tenant ${JSON.stringify(tenant)}`} (a dependency must be a job of the same tenant)`,
            field(i, "dependsOn"),
          );
        }
      }
    });
    return writePlanned(db, tx, jobs, plan, existing, insert);
  });
}

/**
 * The writes of a flow once its existing dependencies are locked and read (`existing`), on
 * `tx`: inserts the jobs, sets their states, moves those that ended at once into history,
 * writes the edges and marks the dependencies. Shared with sequences (sequence-enqueue.ts),
 * whose plan is known only once the key's row is locked.
 */
export async function writePlanned(
  db: JobsDatabase,
  tx: Executor,
  jobs: NewJob[],
  plan: FlowPlan,
  existing: Map<number, ExistingJob>,
  insert: InsertJobs,
): Promise<number[]> {
  const ids = await insert(tx, jobs);
  const states: State[] = new Array(jobs.length);
  for (const i of plan.order) states[i] = stateOf(plan.items[i] as FlowItem, existing, states, ids);
  await writeStates(db, tx, plan, states, ids);
  await moveEnded(
    db,
    tx,
    ids.filter((_, i) => FINISHED_BADLY.has((states[i] as State | undefined)?.status ?? "")),
  );
  const edges = plan.items.flatMap((item, i) =>
    [...item.existing, ...item.local.map((j) => ids[j] as number)].map((dep) => ({ edge: [ids[i] as number, dep], holds: item.policy === "hold" })),
  );
  // Holding edges name their column (migration 25); the others are written as before it.
  for (const holds of [false, true]) {
    const some = edges.filter((e) => e.holds === holds).map((e) => e.edge);
    for (let from = 0; from < some.length; from += EDGES_PER_STATEMENT) {
      const chunk = some.slice(from, from + EDGES_PER_STATEMENT);
      await tx.query(
        holds
          ? `INSERT INTO ${db.dependenciesTable} (job_id, depends_on_id, holds) VALUES ${valuesList(chunk.length, 2, (p) => `(${p(1)}, ${p(2)}, ${db.sql.boolean(true)})`)}`
          : `INSERT INTO ${db.dependenciesTable} (job_id, depends_on_id) VALUES ${valuesList(chunk.length, 2, (p) => `(${p(1)}, ${p(2)})`)}`,
        chunk.flat(),
      );
    }
  }
  // Marked in history too: a failed job that holds a dependent releases it when, retried, it ends done.
  const named = plan.existingIds.filter((id) => !existing.get(id)?.hasDependents);
  for (const ended of [false, true]) {
    const some = named.filter((id) => existing.get(id)?.ended === ended);
    if (some.length === 0) continue;
    await tx.query(`UPDATE ${ended ? db.historyTable : db.table} SET has_dependents = ${db.sql.boolean(true)} WHERE ${db.sql.inList("id", "$1")}`, [some]);
  }
  return ids;
}

/**
 * A dependency by ref obeys the rule of one by id: the same tenant, or no tenant on both sides.
 * Checked before the transaction: a cross-tenant edge would let one tenant's failure fail
 * another's job, and show its id in the other's dependsOn.
 */
function checkLocalTenants(jobs: NewJob[], plan: FlowPlan, field: (i: number, name: string) => string): void {
  plan.items.forEach((item, i) => {
    const tenant = (jobs[i] as NewJob).tenant;
    for (const j of item.local) {
      const other = (jobs[j] as NewJob).tenant;
      if (other === tenant) continue;
      throw new JobError(
        `${field(i, "dependsOn")} names a ref (${field(j, "ref")}) whose job ${other === null ? "has no tenant" : `is of tenant ${JSON.stringify(other)}`}; this job ${tenant === null ? "has no tenant" : `is of tenant ${JSON.stringify(tenant)}`} (a dependency must be a job of the same tenant)`,
        field(i, "dependsOn"),
      );
    }
  });
}

export interface ExistingJob {
  status: string;
  tenant: string | null;
  hasDependents: boolean;
  /** Read from history. */
  ended: boolean;
}

/**
 * Locks and reads the existing jobs `ids`: the live table's rows, then history's (ended ones,
 * locked too: a retry moving one back to the live table then waits, and carries the
 * has_dependents this enqueue sets), then the live table again for any a retry moved back
 * between the two reads.
 */
export async function lockExisting(db: JobsDatabase, tx: Executor, ids: number[]): Promise<Map<number, ExistingJob>> {
  const found = new Map<number, ExistingJob>();
  if (ids.length === 0) return found;
  const lock = db.dialect === "sqlite" ? "" : " FOR UPDATE";
  const read = async (table: string, wanted: number[], ended: boolean) => {
    const { rows } = await tx.query<{ id: number | string; status: string; tenant: string | null; has_dependents: unknown }>(
      `SELECT id, status, tenant, has_dependents FROM ${table} WHERE ${db.sql.inList("id", "$1")} ORDER BY id${lock}`,
      [wanted],
    );
    for (const r of rows) found.set(Number(r.id), { status: r.status, tenant: r.tenant, hasDependents: Boolean(Number(r.has_dependents)), ended });
  };
  const missing = () => ids.filter((id) => !found.has(id));
  await read(db.table, ids, false);
  if (missing().length > 0) await read(db.historyTable, missing(), true);
  if (missing().length > 0) await read(db.table, missing(), false);
  return found;
}

function stateOf(item: FlowItem, existing: Map<number, ExistingJob>, states: State[], ids: number[]): State {
  const deps = [
    ...item.existing.map((id) => ({ id, status: (existing.get(id) as ExistingJob).status })),
    ...item.local.map((j) => ({ id: ids[j] as number, status: (states[j] as State).status })),
  ];
  // "hold": a failed dependency counts as unfinished (the job waits for its retry); a cancelled one as ended.
  const held = (status: string) => item.policy === "hold" && status === "failed";
  const broken = deps.find((d) => FINISHED_BADLY.has(d.status));
  if (broken && item.policy !== "run" && item.policy !== "hold") {
    return {
      status: item.policy === "cancel" ? "cancelled" : "failed",
      error: `dependency ${broken.id} ${broken.status === "failed" ? "failed" : "was cancelled"}; onDependencyFailure is "${item.policy}"`,
    };
  }
  const depsPending = deps.filter((d) => d.status !== "done" && (!FINISHED_BADLY.has(d.status) || held(d.status))).length;
  return { status: depsPending > 0 ? "waiting" : "pending", depsPending };
}

/** One UPDATE per distinct state: a flow's jobs mostly share a few. */
async function writeStates(db: JobsDatabase, tx: Executor, plan: FlowPlan, states: State[], ids: number[]): Promise<void> {
  const groups = new Map<string, { ids: number[]; state: State; policy: string | null; referenced: boolean }>();
  plan.items.forEach((item, i) => {
    const state = states[i] as State;
    if (!item.dependent && !item.referenced) return;
    // A holding job is stored as "run" (a cancelled dependency releases it); its edges say it holds.
    const policy = item.dependent ? (item.policy === "hold" ? "run" : item.policy) : null;
    const key = JSON.stringify([state, policy, item.referenced]);
    const group = groups.get(key) ?? { ids: [], state, policy, referenced: item.referenced };
    group.ids.push(ids[i] as number);
    groups.set(key, group);
  });
  const yes = String(db.sql.boolean(true));
  const no = String(db.sql.boolean(false));
  for (const { ids: groupIds, state, policy, referenced } of groups.values()) {
    const finished = state.status === "failed" || state.status === "cancelled";
    await tx.query(
      `UPDATE ${db.table}
       SET status = $2, deps_pending = $3, on_dependency_failure = $4, last_error = $5, has_dependents = ${referenced ? yes : no},
           finished_at = ${finished ? db.sql.now : "NULL"}, updated_at = ${db.sql.now}
       WHERE ${db.sql.inList("id", "$1")}`,
      [groupIds, state.status, "depsPending" in state ? state.depsPending : 0, policy, "error" in state ? state.error : null],
    );
  }
}
