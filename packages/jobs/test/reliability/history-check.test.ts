// The history checker (helpers/history-check.ts) on histories written by hand: a clean one
// passes, and each invariant has a history with one planted violation that only it catches.
import { describe, expect, it } from "vitest";
import type { FinalJob, HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations, INVARIANTS, type Invariant } from "./helpers/history-check.js";
import type { Grant } from "./helpers/grant-log.js";

/**
 * Four jobs through the kinds of runs the fault tests see: a plain one; one whose worker died
 * and whose job was reclaimed; one that failed and was retried; one taken from a frozen worker
 * whose late heartbeat, completion and durable step were refused.
 */
function clean(): { history: HistoryEvent[]; finals: FinalJob[] } {
  const history: HistoryEvent[] = [
    { kind: "enqueued", at: 0, job: 1, by: "p" },
    { kind: "enqueued", at: 1, job: 2, by: "p" },
    { kind: "enqueued", at: 2, job: 3, by: "p" },
    { kind: "enqueued", at: 3, job: 4, by: "p" },
    { kind: "claimed", at: 10, job: 1, attempt: 1, token: "t1", worker: "w1" },
    { kind: "heartbeat", at: 15, sentAt: 14, job: 1, token: "t1", worker: "w1", accepted: true },
    { kind: "completed", at: 20, sentAt: 19, job: 1, token: "t1", worker: "w1", accepted: true },
    { kind: "claimed", at: 11, job: 2, attempt: 1, token: "t2a", worker: "w2" },
    { kind: "died", at: 12, worker: "w2" },
    { kind: "reclaimed", at: 40, job: 2, attempts: 1, worker: "w1", status: "pending" },
    { kind: "claimed", at: 41, job: 2, attempt: 2, token: "t2b", worker: "w1" },
    { kind: "completed", at: 50, sentAt: 49, job: 2, token: "t2b", worker: "w1", accepted: true },
    { kind: "claimed", at: 12, job: 3, attempt: 1, token: "t3a", worker: "w1" },
    { kind: "failed", at: 13, sentAt: 13, job: 3, token: "t3a", worker: "w1", accepted: true, willRetry: true },
    { kind: "claimed", at: 60, job: 3, attempt: 2, token: "t3b", worker: "w1" },
    { kind: "completed", at: 61, sentAt: 61, job: 3, token: "t3b", worker: "w1", accepted: true },
    { kind: "claimed", at: 13, job: 4, attempt: 1, token: "t4a", worker: "w3" },
    { kind: "reclaimed", at: 45, job: 4, attempts: 1, worker: "w1", status: "pending" },
    { kind: "claimed", at: 46, job: 4, attempt: 2, token: "t4b", worker: "w1" },
    { kind: "heartbeat", at: 70, sentAt: 69, job: 4, token: "t4a", worker: "w3", accepted: false },
    { kind: "completed", at: 71, sentAt: 70, job: 4, token: "t4a", worker: "w3", accepted: false },
    { kind: "completed", at: 72, sentAt: 71, job: 4, token: "t4b", worker: "w1", accepted: true },
    // Job 4's durable steps: w3 saved "a" before the takeover; its "b" was refused after it,
    // and w1's run (answered "a" from storage) saved "b".
    { kind: "step", at: 14, sentAt: 13.5, job: 4, token: "t4a", worker: "w3", name: "a", accepted: true },
    { kind: "step", at: 68, sentAt: 67, job: 4, token: "t4a", worker: "w3", name: "b", accepted: false },
    { kind: "step", at: 48, sentAt: 47, job: 4, token: "t4b", worker: "w1", name: "b", accepted: true },
  ];
  const finals: FinalJob[] = [
    { id: 1, status: "done", attempts: 1 },
    { id: 2, status: "done", attempts: 2 },
    { id: 3, status: "done", attempts: 2 },
    { id: 4, status: "done", attempts: 2 },
  ];
  return { history, finals };
}

function invariantsBroken(history: HistoryEvent[], finals: FinalJob[], grants?: Map<string, Grant>): Invariant[] {
  return [...new Set(checkHistory(history, finals, { grants }).map((v) => v.invariant))].sort();
}

/** Replaces the one event matching `match` (there must be exactly one) by `change(event)`. */
function edit(history: HistoryEvent[], match: (e: HistoryEvent) => boolean, change: (e: HistoryEvent) => HistoryEvent | null): HistoryEvent[] {
  expect(history.filter(match)).toHaveLength(1);
  return history.flatMap((e) => (match(e) ? [change(e)].filter((x): x is HistoryEvent => x !== null) : [e]));
}

describe("history checker", () => {
  it("passes a clean history of deaths, reclaims, retries and refused stale writes", () => {
    const { history, finals } = clean();
    const violations = checkHistory(history, finals);
    expect(violations, describeViolations(violations)).toEqual([]);
  });

  const planted: Record<Invariant, () => { history: HistoryEvent[]; finals: FinalJob[] }> = {
    // An enqueue returned id 1 to its caller, and the row is gone (a failover lost it).
    "acknowledged-present": () => {
      const { history, finals } = clean();
      return { history, finals: finals.filter((j) => j.id !== 1) };
    },
    // Job 2 claimed again while its first run was never handed back: two owners at once.
    "one-live-claim": () => {
      const { history, finals } = clean();
      return {
        history: edit(
          history,
          (e) => e.kind === "reclaimed" && e.job === 2,
          () => null,
        ),
        finals,
      };
    },
    // The frozen worker's heartbeat, sent after attempt 2 was claimed, extended the lease.
    "no-stale-write": () => {
      const { history, finals } = clean();
      return {
        history: edit(
          history,
          (e) => e.kind === "heartbeat" && e.token === "t4a",
          (e) => ({ ...e, accepted: true }) as HistoryEvent,
        ),
        finals,
      };
    },
    // Job 1's completion landed twice.
    "one-completion": () => {
      const { history, finals } = clean();
      return { history: [...history, { kind: "completed", at: 25, sentAt: 19, job: 1, token: "t1", worker: "w1", accepted: true }], finals };
    },
    // The table forgot job 3's second attempt.
    "attempts-monotonic": () => {
      const { history, finals } = clean();
      return { history, finals: finals.map((j) => (j.id === 3 ? { ...j, attempts: 1 } : j)) };
    },
    // The frozen worker's step "b", sent after attempt 2 was claimed, was saved (and so saved twice).
    "step-once": () => {
      const { history, finals } = clean();
      return {
        history: edit(
          history,
          (e) => e.kind === "step" && e.token === "t4a" && e.name === "b",
          (e) => ({ ...e, accepted: true }) as HistoryEvent,
        ),
        finals,
      };
    },
    // Job 3 never got a verdict.
    "every-job-ends": () => {
      const { history, finals } = clean();
      return {
        history: edit(
          history,
          (e) => e.kind === "completed" && e.token === "t3b",
          () => null,
        ),
        finals: finals.map((j) => (j.id === 3 ? { ...j, status: "running" } : j)),
      };
    },
  };

  it.each(INVARIANTS)("catches a planted violation of %s, and only that one", (invariant) => {
    const { history, finals } = planted[invariant]();
    expect(invariantsBroken(history, finals)).toEqual([invariant]);
  });

  it("admits a start lost at a fault (uncountedStartsBefore), and only before the fault ended", () => {
    const { history, finals } = clean();
    // Job 3's first run started as the connection died: its attempt went uncounted, its failure
    // left attempts at 0, and the retry was handed attempt 1 again.
    const lost = edit(
      history,
      (e) => e.kind === "claimed" && e.token === "t3b",
      (e) => ({ ...e, attempt: 1 }) as HistoryEvent,
    );
    const uncounted = finals.map((j) => (j.id === 3 ? { ...j, attempts: 1 } : j));
    expect(invariantsBroken(lost, uncounted)).toEqual(["attempts-monotonic"]);
    expect(checkHistory(lost, uncounted, { uncountedStartsBefore: 30 })).toEqual([]);
    // The run claimed at 12 is not before a fault that ended at 5: no excuse.
    expect(checkHistory(lost, uncounted, { uncountedStartsBefore: 5 }).map((v) => v.invariant)).toEqual(["attempts-monotonic"]);
  });

  it("takes a run whose start write was refused for no claim, and catches any write of it that lands", () => {
    const { history, finals } = clean();
    // Job 2, after its reclaim: w3's handler ran ahead of its start write's answer (PostgreSQL),
    // the write found the job taken (a forced reclaim), and w1's run got attempt 2 as well.
    const ahead: HistoryEvent[] = [
      ...history,
      { kind: "claimed", at: 40.5, job: 2, attempt: 2, token: "t2x", worker: "w3" },
      { kind: "start-refused", at: 42, job: 2, token: "t2x", worker: "w3" },
      { kind: "heartbeat", at: 43, sentAt: 42.5, job: 2, token: "t2x", worker: "w3", accepted: false },
    ];
    expect(checkHistory(ahead, finals)).toEqual([]);
    // Without the refusal on record, it is a second live claim of attempt 2.
    const unrefused = ahead.filter((e) => e.kind !== "start-refused");
    expect(invariantsBroken(unrefused, finals)).toEqual(["attempts-monotonic", "one-live-claim"]);
    // Its heartbeat accepted: the run the table never granted wrote.
    const landed = edit(
      ahead,
      (e) => e.kind === "heartbeat" && e.token === "t2x",
      (e) => ({ ...e, accepted: true }) as HistoryEvent,
    );
    expect(invariantsBroken(landed, finals)).toEqual(["no-stale-write"]);
    // A heartbeat it sent before w1's run was granted lands while its token is still the job's:
    // the start write, pipelined on another connection, was answered after it.
    const early = edit(
      landed,
      (e) => e.kind === "heartbeat" && e.token === "t2x",
      (e) => ({ ...e, sentAt: 40.7, at: 40.8 }) as HistoryEvent,
    );
    expect(checkHistory(early, finals)).toEqual([]);
    // Its completion never lands, however early.
    const verdict = edit(
      early,
      (e) => e.kind === "heartbeat" && e.token === "t2x",
      (e) => ({ ...e, kind: "completed" }) as HistoryEvent,
    );
    expect(invariantsBroken(verdict, finals)).toContain("no-stale-write");
  });

  it("catches each form of a step saved wrongly: twice by successive runs, by a run never claimed, by a run whose start was refused", () => {
    const { history, finals } = clean();
    const detailsOf = (h: HistoryEvent[]) => checkHistory(h, finals).map((v) => `${v.invariant}: ${v.detail}`);
    // w1's run saved "a" again, though w3's save of it had landed: each save was its run's own, but one step ran twice.
    const again: HistoryEvent[] = [...history, { kind: "step", at: 47.5, sentAt: 47.2, job: 4, token: "t4b", worker: "w1", name: "a", accepted: true }];
    expect(detailsOf(again)).toEqual([expect.stringMatching(/^step-once: step "a" saved twice/)]);
    // A save by a token no run of the job was claimed with.
    const stranger: HistoryEvent[] = [...history, { kind: "step", at: 30, sentAt: 29, job: 1, token: "tx", worker: "w9", name: "a", accepted: true }];
    expect(detailsOf(stranger)).toEqual([expect.stringMatching(/^step-once: step "a" saved by a run never claimed/)]);
    // Job 2's run whose start was refused (it shares attempt 2 with w1's run): its step saved
    // before w1's run was granted is its own; one sent after that must have been refused.
    const ahead: HistoryEvent[] = [
      ...history,
      { kind: "claimed", at: 40.5, job: 2, attempt: 2, token: "t2x", worker: "w3" },
      { kind: "start-refused", at: 42, job: 2, token: "t2x", worker: "w3" },
      { kind: "step", at: 40.8, sentAt: 40.7, job: 2, token: "t2x", worker: "w3", name: "a", accepted: true },
    ];
    expect(checkHistory(ahead, finals)).toEqual([]);
    const late = edit(
      ahead,
      (e) => e.kind === "step" && e.token === "t2x",
      (e) => ({ ...e, sentAt: 41.5, at: 41.6 }) as HistoryEvent,
    );
    expect(detailsOf(late)).toEqual([expect.stringMatching(/^step-once: step "a" of attempt 2 \(w3\) sent after attempt 2 was claimed/)]);
  });

  it("orders claims as the database granted them (grants): a claim recorded late is no second owner, a grant out of order still is", () => {
    const { history, finals } = clean();
    // Job 5: w3's process stalled (SQLite's busy wait) between its run's grant and its handler's
    // call, past the lease; w1 took the job and recorded attempt 2 before w3 recorded attempt 1.
    const late: HistoryEvent[] = [
      ...history,
      { kind: "enqueued", at: 4, job: 5, by: "p" },
      { kind: "reclaimed", at: 44, job: 5, attempts: 1, worker: "w1", status: "pending" },
      { kind: "claimed", at: 45, job: 5, attempt: 2, token: "t5b", worker: "w1" },
      { kind: "claimed", at: 47, job: 5, attempt: 1, token: "t5a", worker: "w3" },
      { kind: "step", at: 48.5, sentAt: 48, job: 5, token: "t5a", worker: "w3", name: "a", accepted: false },
      { kind: "step", at: 49, sentAt: 48.8, job: 5, token: "t5b", worker: "w1", name: "a", accepted: true },
      { kind: "completed", at: 50, sentAt: 49.5, job: 5, token: "t5b", worker: "w1", accepted: true },
    ];
    const done5: FinalJob[] = [...finals, { id: 5, status: "done", attempts: 2 }];
    const order = ["t1", "t2a", "t3a", "t4a", "t5a", "t2b", "t3b", "t4b", "t5b"];
    const grantsIn = (tokens: string[]) =>
      new Map(
        tokens.map((token, i) => {
          const claim = late.find((e) => e.kind === "claimed" && e.token === token) as Extract<HistoryEvent, { kind: "claimed" }>;
          return [token, { seq: i + 1, job: claim.job, attempt: claim.attempt }];
        }),
      );
    // By the recorders' clocks it reads as two owners and an attempt going back.
    expect(invariantsBroken(late, done5)).toEqual(["attempts-monotonic", "one-live-claim"]);
    const grants = grantsIn(order);
    expect(checkHistory(late, done5, { grants })).toEqual([]);
    expect(checkHistory(history, finals, { grants })).toEqual([]);
    // The database granted attempt 2 before attempt 1: flagged whatever the recorders' clocks say.
    const swapped = grantsIn(order.map((t) => (t === "t5a" ? "t5b" : t === "t5b" ? "t5a" : t)));
    expect(invariantsBroken(late, done5, swapped)).toEqual(["attempts-monotonic", "one-live-claim"]);
    // A run the database never granted, or granted at another attempt.
    const detailsOf = (g: Map<string, Grant>) => checkHistory(late, done5, { grants: g }).map((v) => `${v.invariant}: ${v.detail}`);
    const ungranted = new Map([...grants].filter(([token]) => token !== "t5a"));
    expect(detailsOf(ungranted)).toEqual([expect.stringMatching(/^one-live-claim: attempt 1 \(w3, t5a\) ran, but the database never granted it/)]);
    const recounted = new Map([...grants].map(([token, g]) => [token, token === "t5a" ? { ...g, attempt: 2 } : g]));
    expect(detailsOf(recounted)).toEqual([expect.stringMatching(/^one-live-claim: attempt 1 \(w3\) ran as the database's attempt 2/)]);
  });

  it("catches the other forms: attempts going back, a done job whose completion nobody saw, a token granted twice", () => {
    const { history, finals } = clean();
    const back = edit(
      history,
      (e) => e.kind === "claimed" && e.token === "t3b",
      (e) => ({ ...e, attempt: 0 }) as HistoryEvent,
    );
    expect(invariantsBroken(back, finals)).toContain("attempts-monotonic");
    const unseen = edit(
      history,
      (e) => e.kind === "completed" && e.token === "t1",
      () => null,
    );
    expect(invariantsBroken(unseen, finals)).toEqual(["every-job-ends"]);
    const twice = edit(
      history,
      (e) => e.kind === "claimed" && e.token === "t2b",
      (e) => ({ ...e, token: "t2a" }) as HistoryEvent,
    );
    expect(invariantsBroken(twice, finals)).toContain("one-live-claim");
  });
});
