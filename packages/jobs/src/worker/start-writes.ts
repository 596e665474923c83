import { OUTAGE_BACKOFF, backoffMs } from "../base/retry.js";
import type { JobsDatabase } from "../core/database.js";
import type { OrderedSender } from "../db/executor.js";
import { sendStarts } from "../run/start.js";
import type { Run } from "./run.js";

/**
 * Start writes in flight at once: a slot freed while one is under way need not wait for it to
 * land and then for another round trip.
 */
const MAX_START_WRITES = 2;

/**
 * How long the start-write connection may have been silent and still be trusted with a write
 * whose handlers run before its answer. A busy worker writes far more often; after a pause, the
 * first start write waits for its answer, one round trip.
 */
const SENDER_QUIET_MS = 1000;

/** What a start write's answer does to its runs (WorkerRuns carries out each transition). */
export interface StartAnswers {
  /** starting → running: `answered` settles with the write's answer. */
  run(run: Run, answered: Promise<unknown>): void;
  /** starting → ended, fenced: the write found the job no longer ours before it ran. */
  fenced(run: Run): void;
  /** A run that started before the answer came turned out not ours (cancelled meanwhile). */
  lost(run: Run): void;
  /** starting → buffered: the write failed (not sent), or the worker is stopping. */
  requeue(runs: readonly Run[], leaseInDoubt: boolean): void;
  /** Asked before a run starts: then it goes back to buffered, for shutdown to hand back. */
  stopping(): boolean;
  /** A write landed or its backoff ran out: the claim loop may have something to do. */
  settled(): void;
  onError(error: unknown, during: string): void;
}

/**
 * The start writes of buffered runs (see start.ts for the rule: a buffered job's attempt is
 * counted by the write just before it runs), with one fenced write per batch that also renews
 * their leases. While their leases are fresh (held or confirmed less than half a lease ago, so
 * nobody else can have them), handlers run as soon as the write has left and its answer is
 * checked after. Past that, as after a stall, the answer comes first and a run taken over
 * meanwhile never starts.
 */
export class StartWrites {
  private readonly writes = new Set<Promise<void>>();
  private retryAt = 0;
  private failures = 0;
  private confirmedAt = 0;
  /** Where start writes go without a round trip (PostgreSQL), or null. */
  private readonly sender: OrderedSender | null;

  constructor(
    private readonly db: JobsDatabase,
    private readonly lease: number,
  ) {
    this.sender = db.executor.orderedSender?.() ?? null;
  }

  /** Whether another write may be sent now (few in flight, no backoff running). */
  get open(): boolean {
    return this.writes.size < MAX_START_WRITES && performance.now() >= this.retryAt;
  }

  /** The lease keeper renewed every claim held when it asked (at `askedAt`, performance.now()). */
  confirmed(askedAt: number): void {
    this.confirmedAt = Math.max(this.confirmedAt, askedAt);
  }

  /** Sends the start write of `runs` (all starting) and carries its answer to `to`. */
  send(runs: readonly Run[], to: StartAnswers): void {
    const now = performance.now();
    // Only where a write can be known to have left without its answer (see sendStarts): elsewhere
    // `sent` is the answer, and the answer is checked before anything runs.
    // And only on a connection heard from lately: a write into a connection that died unnoticed
    // (a failover) would run its handlers with their attempts never counted.
    const fresh =
      this.sender !== null &&
      this.sender.answeredWithin(SENDER_QUIET_MS) &&
      runs.every((run) => now - Math.max(run.heldAt, this.confirmedAt) < (this.lease * 1000) / 2);
    const write = sendStarts(
      this.db,
      this.sender,
      runs.map((run) => run.job),
      this.lease,
    );
    // Failed, the answer tells nothing more (the server may or may not have run the write).
    const answered: Promise<unknown> = write.owned.catch(() => undefined);
    const runAll = (owned: Set<string> | null) => {
      this.failures = 0;
      const back: Run[] = [];
      for (const run of runs) {
        if (owned && !owned.has(run.job.token)) to.fenced(run);
        else if (to.stopping()) back.push(run);
        else to.run(run, answered);
      }
      if (back.length > 0) to.requeue(back, false);
    };
    const started: Promise<void> = (fresh ? write.sent.then(() => runAll(null)) : write.owned.then(runAll))
      .catch((error: unknown) => {
        to.onError(error, "starting jobs");
        // Not sent: still held, still unstarted.
        to.requeue(runs, true);
        const wait = backoffMs(OUTAGE_BACKOFF, this.failures++);
        this.retryAt = performance.now() + wait;
        setTimeout(() => to.settled(), wait).unref();
      })
      .finally(() => {
        this.writes.delete(started);
        to.settled();
      });
    this.writes.add(started);
    if (fresh) {
      write.owned.then(
        (owned) => runs.filter((run) => !owned.has(run.job.token)).forEach((run) => to.lost(run)),
        // Sent, so the handlers run; the server may or may not have counted their attempts.
        (error: unknown) => to.onError(error, "recording job starts"),
      );
    }
  }

  /** Resolves once no start write is in flight. */
  async idle(): Promise<void> {
    while (this.writes.size > 0) await Promise.all(this.writes);
  }

  /** Closes the start writes' own connection, if any (after the last write). */
  close(): Promise<void> {
    return this.sender?.close() ?? Promise.resolve();
  }
}
