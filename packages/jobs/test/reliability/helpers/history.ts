import type { Child } from "./children.js";

/**
 * What a fault test saw happen, one event per line, from every process: producers record the
 * enqueues that returned an id, worker processes (fixtures/worker.ts with `history: true`)
 * record their claims, heartbeats and verdicts as the queue reported them, the test records
 * the processes it killed. `at` is the recording process's wall clock (one host, one clock);
 * `sentAt` is when the write was issued, so "granted before the write was sent" is certain.
 * checkHistory (history-check.ts) judges it against the table's final state.
 */
export type HistoryEvent =
  /** An enqueue that returned this id to its caller. */
  | { kind: "enqueued"; at: number; job: number; by: string }
  /** A run started with this claim token (the handler was called). */
  | { kind: "claimed"; at: number; job: number; attempt: number; token: string; worker: string }
  /** A heartbeat of the run holding `token`: extended (accepted) or refused (fenced). */
  | { kind: "heartbeat"; at: number; sentAt: number; job: number; token: string; worker: string; accepted: boolean }
  /** The run's completion: written (accepted) or refused (fenced). */
  | { kind: "completed"; at: number; sentAt: number; job: number; token: string; worker: string; accepted: boolean }
  /** The run's failure: written (accepted; `willRetry` if it went back to pending) or refused. */
  | { kind: "failed"; at: number; sentAt: number; job: number; token: string; worker: string; accepted: boolean; willRetry: boolean }
  /** A sweep took the job back from a lost run; `attempts` as it stood. */
  | { kind: "reclaimed"; at: number; job: number; attempts: number; worker: string; status: "pending" | "failed" }
  /** Handed back at shutdown without using its attempt. */
  | { kind: "released"; at: number; job: number; attempt: number; worker: string }
  /** The test killed this worker process: what it had not printed yet is lost with it. */
  | { kind: "died"; at: number; worker: string };

export type HistoryKind = HistoryEvent["kind"];

/** The table's verdict on a job at the end of the test. */
export interface FinalJob {
  id: number;
  status: string;
  attempts: number;
}

/** The history lines a worker process printed (fixtures/worker.ts prints `{ type: "history", event }`). */
export function historyOf(children: Iterable<Child>): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  for (const child of children) {
    for (const message of child.messages) if (message.type === "history") events.push(message.event as HistoryEvent);
  }
  return events;
}

/** Records a killed process; call it just before the kill. */
export function died(worker: string): HistoryEvent {
  return { kind: "died", at: Date.now(), worker };
}

/** Records an acknowledged enqueue. */
export function enqueued(job: number, by: string): HistoryEvent {
  return { kind: "enqueued", at: Date.now(), job, by };
}

/** Reads every job's final verdict (id, status, attempts) from a jobs table. */
export async function finalJobs(query: (sql: string) => Promise<{ rows: Record<string, unknown>[] }>, table: string): Promise<FinalJob[]> {
  const { rows } = await query(`SELECT id, status, attempts FROM ${table}`);
  return rows.map((r) => ({ id: Number(r.id), status: String(r.status), attempts: Number(r.attempts) }));
}
