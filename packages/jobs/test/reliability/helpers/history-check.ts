import type { Grant } from "./grant-log.js";
import type { FinalJob, HistoryEvent } from "./history.js";

/** The invariants checkHistory verifies (listed, with what each means, in RELIABILITY.md). */
export const INVARIANTS = [
  "acknowledged-present",
  "one-live-claim",
  "no-stale-write",
  "one-completion",
  "attempts-monotonic",
  "every-job-ends",
  "step-once",
] as const;
export type Invariant = (typeof INVARIANTS)[number];

export interface Violation {
  invariant: Invariant;
  job: number;
  detail: string;
}

type Claim = Extract<HistoryEvent, { kind: "claimed" }>;
type Write = Extract<HistoryEvent, { kind: "heartbeat" | "completed" | "failed" }>;
type StepSave = Extract<HistoryEvent, { kind: "step" }>;
const FINAL = new Set(["done", "failed", "cancelled"]);

/**
 * Judges a history against the table's final state; returns every violation (none: the run
 * kept every promise it can be held to from outside). Sound by construction: a rule fires only
 * on what cannot happen in a correct run, whatever the recording delays — e.g. a stale write is
 * one issued (`sentAt`) after a later claim was already recorded, so certainly after its grant.
 */
export interface CheckOptions {
  /**
   * Runs claimed before this instant (the end of the test's last fault) may have their start —
   * the write that counts the attempt — lost, by design: a handler runs as soon as that write
   * has left, and PostgreSQL commits it without waiting for the disk or a standby. A connection
   * cut or a primary lost at that moment leaves the attempt uncounted (a free extra attempt,
   * never a lost job): such a run's attempt may read one lower, or be handed out again.
   */
  uncountedStartsBefore?: number;
  /**
   * The database's own record of the runs it granted, by token (grant-log.ts). Given, claims
   * are taken in the order the database granted them rather than the order their workers
   * recorded them (a process may stall between the grant and its record), and every claim must
   * be among them, at the attempt the database counted.
   */
  grants?: ReadonlyMap<string, Grant>;
}

export function checkHistory(history: readonly HistoryEvent[], finals: readonly FinalJob[], options: CheckOptions = {}): Violation[] {
  const uncounted = (claim: Claim) => (claim.at < (options.uncountedStartsBefore ?? Number.NEGATIVE_INFINITY) ? 1 : 0);
  const violations: Violation[] = [];
  const flag = (invariant: Invariant, job: number, detail: string) => violations.push({ invariant, job, detail });
  const final = new Map(finals.map((j) => [j.id, j]));
  const byJob = new Map<number, HistoryEvent[]>();
  const died = new Set<string>();
  for (const event of history) {
    if (event.kind === "died") died.add(event.worker);
    else (byJob.get(event.job) ?? byJob.set(event.job, []).get(event.job)!).push(event);
  }

  // acknowledged-present: an id handed to a caller is a promise the row exists.
  for (const event of history) {
    if (event.kind === "enqueued" && !final.has(event.job))
      flag("acknowledged-present", event.job, `enqueue by ${event.by} returned ${event.job}, not in the table`);
  }

  for (const [job, events] of byJob) {
    const allClaims = events.filter((e): e is Claim => e.kind === "claimed").sort((a, b) => a.at - b.at);
    // A run whose start write was refused was never granted (its handler ran ahead of the
    // answer): it is no claim of the job, and nothing it writes may land.
    const refusedStarts = new Set(events.filter((e) => e.kind === "start-refused").map((e) => e.token));
    const claims = inGrantOrder(
      allClaims.filter((c) => !refusedStarts.has(c.token)),
      options.grants,
      (detail) => flag("one-live-claim", job, detail),
    );
    const writes = events.filter((e): e is Write => e.kind === "heartbeat" || e.kind === "completed" || e.kind === "failed");
    const claimOf = new Map(claims.map((c) => [c.token, c]));

    // one-live-claim: a job is claimed again only after its previous run was handed over (a
    // failure that retries, a reclaim, a release); one token is one run.
    const seen = new Set<string>();
    for (const claim of allClaims) {
      if (seen.has(claim.token)) flag("one-live-claim", job, `token ${claim.token} granted twice (${claim.worker})`);
      seen.add(claim.token);
    }
    for (let i = 1; i < claims.length; i++) {
      const [a, b] = [claims[i - 1]!, claims[i]!];
      const handedOver = events.some(
        (e) =>
          (e.kind === "failed" && e.token === a.token && e.accepted && e.willRetry) ||
          (e.kind === "reclaimed" && e.attempts >= a.attempt - uncounted(a) && e.attempts < b.attempt) ||
          (e.kind === "released" && e.attempt === a.attempt),
      );
      if (!handedOver) flag("one-live-claim", job, `attempt ${b.attempt} (${b.worker}) claimed while attempt ${a.attempt} (${a.worker}) was never handed over`);
    }

    // no-stale-write: once a later run was granted, nothing the earlier one sends may land.
    for (const write of writes) {
      // Its claim did grant it the token: a lease extension may land until another run is
      // granted (the start write, pipelined on its own connection, can be answered after a
      // heartbeat sent later). Its verdict never, nor anything sent once another run was granted.
      const refusedClaim = refusedStarts.has(write.token) ? allClaims.find((c) => c.token === write.token) : undefined;
      if (
        write.accepted &&
        refusedStarts.has(write.token) &&
        (write.kind !== "heartbeat" || claims.some((c) => c.at > (refusedClaim?.at ?? Number.NEGATIVE_INFINITY) && c.at < write.sentAt))
      )
        flag("no-stale-write", job, `${write.kind} of a run whose start was refused (${write.worker}), accepted`);
      const own = claimOf.get(write.token);
      if (!write.accepted || !own) continue;
      const later = claims.find((c) => c.attempt > own.attempt && c.at < write.sentAt);
      if (later) flag("no-stale-write", job, `${write.kind} of attempt ${own.attempt} sent after attempt ${later.attempt} was claimed, and accepted`);
    }

    // one-completion: one accepted completion, and nothing accepted after the verdict.
    const completions = writes.filter((w) => w.kind === "completed" && w.accepted);
    if (completions.length > 1) flag("one-completion", job, `${completions.length} completions accepted (${completions.map((c) => c.worker).join(", ")})`);
    const verdict = writes.find((w) => (w.kind === "completed" && w.accepted) || (w.kind === "failed" && w.accepted && !w.willRetry));
    if (verdict) {
      const after = writes.find((w) => w.accepted && w !== verdict && w.sentAt > verdict.at);
      if (after) flag("one-completion", job, `${after.kind} accepted after the job's verdict`);
      const status = final.get(job)?.status;
      if (status !== undefined && status !== (verdict.kind === "completed" ? "done" : "failed"))
        flag("one-completion", job, `verdict ${verdict.kind}, table says ${status}`);
    }

    checkSteps(events, allClaims, claims, refusedStarts, (detail) => flag("step-once", job, detail));

    // attempts-monotonic: attempts never go back, and the table counts every run it granted.
    for (let i = 1; i < claims.length; i++) {
      const [a, b] = [claims[i - 1]!, claims[i]!];
      // Only a hand-back at shutdown gives an attempt back to be used again.
      const floor = events.some((e) => e.kind === "released" && e.attempt === a.attempt) ? a.attempt : a.attempt + 1 - uncounted(a);
      if (b.attempt < floor) flag("attempts-monotonic", job, `attempt ${b.attempt} claimed after attempt ${a.attempt}`);
    }
    const highest = Math.max(0, ...claims.map((c) => c.attempt - uncounted(c)));
    const row = final.get(job);
    if (claims.some((c) => c.attempt < 1)) flag("attempts-monotonic", job, "an attempt below 1 was claimed");
    if (row && row.attempts < highest) flag("attempts-monotonic", job, `table says ${row.attempts} attempts, attempt ${highest} was claimed`);
  }

  // every-job-ends: a final verdict for every row; a `done` row's completion is in the history,
  // unless the process that held its last run was killed (its last lines died with it), or that
  // run's completion was reported fenced: a connection lost between the commit and its answer
  // (the primary killed) makes the worker send it again, and the retry finds the job done.
  for (const row of finals) {
    if (!FINAL.has(row.status)) {
      flag("every-job-ends", row.id, `still ${row.status}`);
      continue;
    }
    if (row.status !== "done") continue;
    const events = byJob.get(row.id) ?? [];
    if (events.some((e) => e.kind === "completed" && e.accepted)) continue;
    const refused = new Set(events.filter((e) => e.kind === "start-refused").map((e) => e.token));
    const last = inGrantOrder(
      events.filter((e): e is Claim => e.kind === "claimed" && !refused.has(e.token)).sort((a, b) => a.at - b.at),
      options.grants,
      () => undefined, // flagged above
    ).at(-1);
    const lostWithItsWorker = last ? died.has(last.worker) : died.size > 0;
    const ambiguous = last !== undefined && events.some((e) => e.kind === "completed" && e.token === last.token);
    if (!lostWithItsWorker && !ambiguous) flag("every-job-ends", row.id, "done in the table, but no run's completion was accepted");
  }
  return violations;
}

/**
 * Granted claims (sorted by `at`) in the database's grant order when it is known. A claim the
 * database never granted, or granted at another attempt, is flagged and left out of the order.
 */
function inGrantOrder(claims: Claim[], grants: ReadonlyMap<string, Grant> | undefined, flag: (detail: string) => void): Claim[] {
  if (!grants) return claims;
  const granted: Claim[] = [];
  for (const claim of claims) {
    const grant = grants.get(claim.token);
    if (!grant || grant.job !== claim.job) flag(`attempt ${claim.attempt} (${claim.worker}, ${claim.token}) ran, but the database never granted it`);
    else if (grant.attempt !== claim.attempt) flag(`attempt ${claim.attempt} (${claim.worker}) ran as the database's attempt ${grant.attempt}`);
    else granted.push(claim);
  }
  return granted.sort((a, b) => grants.get(a.token)!.seq - grants.get(b.token)!.seq);
}

/**
 * step-once: a durable step's save lands only for the run holding the job, and once per (job,
 * step name). A save is stale when another run of the job was claimed before it was sent: a
 * later attempt, or — for a run whose start was refused, which shares its attempt with the run
 * that took over — any claim recorded after its own. Its claim did grant it the token until then.
 */
function checkSteps(
  events: readonly HistoryEvent[],
  allClaims: readonly Claim[],
  claims: readonly Claim[],
  refusedStarts: ReadonlySet<string>,
  flag: (detail: string) => void,
): void {
  const saved = new Map<string, StepSave>();
  for (const save of events.filter((e): e is StepSave => e.kind === "step" && e.accepted)) {
    const first = saved.get(save.name);
    if (first) flag(`step ${JSON.stringify(save.name)} saved twice: by ${first.worker} (${first.token}) and by ${save.worker} (${save.token})`);
    else saved.set(save.name, save);
    const own = allClaims.find((c) => c.token === save.token);
    if (!own) {
      flag(`step ${JSON.stringify(save.name)} saved by a run never claimed (${save.worker}, ${save.token})`);
      continue;
    }
    const refused = refusedStarts.has(save.token);
    const later = claims.find((c) => c.token !== save.token && (refused ? c.at > own.at : c.attempt > own.attempt) && c.at < save.sentAt);
    if (later) flag(`step ${JSON.stringify(save.name)} of attempt ${own.attempt} (${save.worker}) sent after attempt ${later.attempt} was claimed, and saved`);
  }
}

/** A short report of violations for an assertion message (the first few of each invariant). */
export function describeViolations(violations: readonly Violation[]): string {
  return INVARIANTS.flatMap((name) => {
    const mine = violations.filter((v) => v.invariant === name);
    if (mine.length === 0) return [];
    return [`${name}: ${mine.length}`, ...mine.slice(0, 5).map((v) => `  job ${v.job}: ${v.detail}`)];
  }).join("\n");
}
