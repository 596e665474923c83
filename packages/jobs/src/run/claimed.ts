import type { Dialect } from "../dialects/dialect.js";
import { decodeRow, type JobColumn } from "../core/job-row.js";
import { openJson } from "../base/payload-codec.js";

/** A job this worker holds: every write about it is fenced by `token`. */
export interface ClaimedJob {
  id: number;
  queue: string;
  task: string;
  payload: unknown;
  priority: number;
  /** This run's number, 1-based (attempts once it has started). */
  attempt: number;
  /**
   * False for a job held in the worker's buffer: its attempt is not counted until `sendStarts`
   * records the start, so a worker that dies holding it gives it back unused.
   */
  started: boolean;
  maxAttempts: number;
  progress: unknown;
  tenant: string | null;
  /** Its fair-share group, '' for none. */
  group: string;
  createdAt: Date;
  runAt: Date;
  token: string;
  /** The enqueuing span's context (OpenTelemetry), linked from the execution span. */
  traceContext?: unknown;
  idempotencyKey?: string | null;
  /** Why the payload could not be opened (payloadCodec: a key this worker lacks): the run fails with it instead of calling the handler. */
  unreadable?: Error;
}

/** What a claim reads of each job it takes. */
export const CLAIMED = [
  "id",
  "queue",
  "task",
  "payload",
  "priority",
  "attempts",
  "max_attempts",
  "progress",
  "tenant",
  "created_at",
  "run_at",
  "claim_token",
  "trace_context",
  "started",
  "group_key",
  // A scheduled run's planned time is in its key (ctx.scheduledAt); null, and cheap, for others.
  "idempotency_key",
] as const satisfies readonly JobColumn[];

/** A claimed row as a statement returns it, before decoding. */
export type ClaimRow = Record<string, unknown> & { id: unknown };

const BESIDE_PAYLOAD = CLAIMED.filter((c): c is Exclude<(typeof CLAIMED)[number], "payload"> => c !== "payload");

/** A claimed row, decoded: what the worker runs. */
export function toClaimed(sql: Dialect, raw: ClaimRow): ClaimedJob {
  const row = decodeRow(sql, BESIDE_PAYLOAD, raw);
  // Opened apart: a payload this worker cannot decrypt fails its run, never the whole claim.
  let payload: unknown = null;
  let unreadable: Error | undefined;
  try {
    payload = openJson(sql.payloadCodec, sql.readJson(raw.payload));
  } catch (error) {
    unreadable = error as Error;
  }
  return {
    ...(unreadable && { unreadable }),
    id: row.id,
    queue: row.queue,
    task: row.task,
    payload,
    priority: row.priority,
    // A held job's attempt is counted when it starts: it will run as attempts + 1.
    attempt: row.attempts + (row.started ? 0 : 1),
    started: row.started,
    maxAttempts: row.max_attempts,
    progress: row.progress,
    tenant: row.tenant,
    group: row.group_key ?? "",
    createdAt: row.created_at,
    runAt: row.run_at,
    token: row.claim_token,
    traceContext: row.trace_context,
    idempotencyKey: row.idempotency_key,
  };
}
