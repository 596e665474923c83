import { performance } from "node:perf_hooks";
import { JobAbortedError } from "../base/abort.js";
import { JobError } from "../base/errors.js";
import { toJsonText } from "../base/payload.js";
import type { JobsDatabase } from "../core/database.js";
import { JobSleep, MAX_SLEEP_SECONDS, type SleepRequest } from "./sleep.js";
import { loadSteps, saveStep, type SavedStep, type StepKind, type StepRow } from "./step-store.js";
import type { WaitForEventOptions } from "../base/types.js";
import { checkEventWait } from "../events/event-input.js";
import { findEvent } from "./wait-event.js";
import { checkInvoke, childAnswer, ChildJobError, enqueueChild, type ChildAnswer } from "./invoke.js";

/** Longest step name, in characters (MariaDB's key column holds 255). */
export const MAX_STEP_NAME_LENGTH = 255;

/** What a run's steps need from it. */
export interface StepScope {
  db: JobsDatabase;
  job: { id: number; token: string; tenant?: string | null };
  /** Whether the run already knows it lost its job (its signal fired). */
  lost(): boolean;
  /** Tells the worker (event, signal) that a step's fenced write was refused. */
  fenced(write: "step" | "sleep"): void;
}

/** The context's call that makes a step of each kind, for errors. */
const CALLS: Record<StepKind, string> = { step: "ctx.step", sleep: "ctx.sleep", event: "ctx.waitForEvent", invoke: "ctx.invoke" };

/** A mistake in the handler's use of steps: running it again would make it again, so no retry. */
class StepError extends JobError {
  readonly retryable = false;
}

/** The step's work ran, yet the job had been taken over: its transaction rolled back. */
class Fenced extends Error {}

/**
 * One run's durable steps (`ctx.step`, `ctx.sleep`). The job's saved steps are read once, at
 * the run's first step, so a job that uses none pays nothing. A name is a step's identity: each
 * is used once per run, and a later run of the job gets the saved result back instead of
 * running the step again.
 */
export class StepRun {
  private saved: Promise<Map<string, SavedStep>> | null = null;
  private readonly used = new Set<string>();
  /** Set when the handler asked to sleep: the run ends, whatever the handler does next. */
  sleeping: SleepRequest | null = null;

  constructor(private readonly scope: StepScope) {}

  async step<T>(name: string, fn: (tx: never) => T | Promise<T>): Promise<Awaited<T>> {
    this.claimName(name, "step");
    if (typeof fn !== "function") throw new StepError(`ctx.step(${JSON.stringify(name)}, fn): fn must be a function, got ${typeof fn}`, "fn");
    const found = await this.found(name, "step");
    if (found) return parsed(found.result) as Awaited<T>;
    const started = performance.now();
    const { db, job } = this.scope;
    const row = (json: string | null): StepRow => ({ name, kind: "step", result: json, durationMs: Math.round(performance.now() - started), wake: null });
    let json: string | null;
    try {
      if (fn.length === 0) {
        json = this.jsonOf(name, await (fn as () => T | Promise<T>)());
        if (!(await saveStep(db, db.executor, job, row(json)))) throw new Fenced();
      } else {
        // The work's writes and the saved result commit together, or neither does.
        json = await db.executor.transaction(async (tx) => {
          const text = this.jsonOf(name, await fn(tx.raw as never));
          if (!(await saveStep(db, tx, job, row(text)))) throw new Fenced();
          return text;
        });
      }
    } catch (error) {
      if (error instanceof Fenced) throw this.refused(name, "step");
      throw error;
    }
    return parsed(json) as Awaited<T>;
  }

  /** `ctx.sleep(name, seconds)`: throws JobSleep to end the run, or returns once the sleep is over. */
  async sleep(name: string, seconds: number): Promise<void> {
    this.claimName(name, "sleep");
    if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0 || seconds > MAX_SLEEP_SECONDS) {
      throw new StepError(
        `ctx.sleep(${JSON.stringify(name)}, seconds): seconds must be a finite number from 0 to ${MAX_SLEEP_SECONDS} (366 days), got ${String(seconds)}`,
        "seconds",
      );
    }
    await this.sleepFor(name, { in: seconds });
  }

  /** `ctx.sleepUntil(name, date)`: as sleep, until an instant (compared with the database clock). */
  async sleepUntil(name: string, date: Date): Promise<void> {
    this.claimName(name, "sleep");
    if (!(date instanceof Date) || Number.isNaN(date.getTime())) {
      throw new StepError(`ctx.sleepUntil(${JSON.stringify(name)}, date): date must be a valid Date, got ${String(date)}`, "date");
    }
    await this.sleepFor(name, { at: date });
  }

  /**
   * `ctx.waitForEvent(name, { event, key, timeout })`: the saved answer (the event's data, or null
   * for a timeout); else an event already sent since the job was created, saved now; else throws
   * JobSleep to end the run, and the queue records the wait (run/wait-event.ts).
   */
  async waitForEvent(name: string, options: WaitForEventOptions): Promise<unknown> {
    this.claimName(name, "event");
    const wait = checkEventWait(name, options, this.scope.job.tenant ?? null, (message, field) => new StepError(message, field));
    const found = await this.found(name, "event");
    if (found) return found.result === null ? null : JSON.parse(found.result);
    const { db, job } = this.scope;
    const sent = await findEvent(db, db.executor, job.id, wait);
    if (sent) {
      const json = sent.data ?? "null";
      if (!(await saveStep(db, db.executor, job, { name, kind: "event", result: json, durationMs: null, wake: null }))) throw this.refused(name, "event");
      return JSON.parse(json);
    }
    this.sleeping = { name, wake: null, wait };
    throw new JobSleep(this.sleeping);
  }

  /**
   * `ctx.invoke(name, task, payload, options)`: the saved answer (the child's result, or a
   * ChildJobError if it failed or was cancelled); else enqueues the child (once per step: a re-run
   * gets the same child) and, if it already ended, saves and returns its answer; else throws
   * JobSleep to end the run, and the queue makes the job wait on its child (run/wait-child.ts).
   */
  async invoke(name: string, task: string, payload: unknown, options: unknown): Promise<unknown> {
    this.claimName(name, "invoke");
    const checked = checkInvoke(name, task, options, (message, field) => new StepError(message, field));
    const found = await this.found(name, "invoke");
    if (found) return answered(name, JSON.parse(found.result!) as ChildAnswer);
    const { db, job } = this.scope;
    const childId = await enqueueChild(db, { id: job.id, tenant: job.tenant ?? null }, name, task, payload, checked);
    const ended = await childAnswer(db, childId);
    if (ended) {
      const json = JSON.stringify(ended);
      if (!(await saveStep(db, db.executor, job, { name, kind: "invoke", result: json, durationMs: null, wake: null }))) throw this.refused(name, "invoke");
      return answered(name, JSON.parse(json) as ChildAnswer);
    }
    this.sleeping = { name, wake: null, wait: { kind: "child", childId } };
    throw new JobSleep(this.sleeping);
  }

  private async sleepFor(name: string, wake: { in: number } | { at: Date }): Promise<void> {
    const found = await this.found(name, "sleep");
    if (found?.due) return;
    // A new sleep saves its wake time; one saved earlier and not over yet (the job ran early) keeps it.
    this.sleeping = { name, wake: found ? null : wake };
    throw new JobSleep(this.sleeping);
  }

  /** Checks a name and takes it for this run; refuses any step once the run asked to sleep. */
  private claimName(name: string, kind: StepKind): void {
    const call = CALLS[kind];
    if (typeof name !== "string" || name.length === 0 || name.length > MAX_STEP_NAME_LENGTH) {
      throw new StepError(`${call}: name must be a non-empty string of at most ${MAX_STEP_NAME_LENGTH} characters, got ${describe(name)}`, "name");
    }
    if (this.sleeping) {
      throw new StepError(
        `${call}(${JSON.stringify(name)}) after ctx.sleep(${JSON.stringify(this.sleeping.name)}) in the same run: the sleep ends the run; let its error propagate`,
        "name",
      );
    }
    if (this.used.has(name)) {
      throw new StepError(
        `${call}(${JSON.stringify(name)}): a step of this name already ran in this run; names identify steps, so give each step (and each loop turn) its own name`,
        "name",
      );
    }
    this.used.add(name);
  }

  /** The saved step of `name`, or undefined; refused when the run lost its job, or the name was saved as another kind. */
  private async found(name: string, kind: StepKind): Promise<SavedStep | undefined> {
    if (this.scope.lost()) throw this.refused(name, kind);
    // A failed read is not kept: the next step of the run reads again.
    this.saved ??= loadSteps(this.scope.db, this.scope.job.id).catch((error: unknown) => {
      this.saved = null;
      throw error;
    });
    const found = (await this.saved).get(name);
    if (found && found.kind !== kind) {
      throw new StepError(
        `${CALLS[kind]}(${JSON.stringify(name)}): this job saved ${JSON.stringify(name)} as a ${found.kind}; a name must stay the same kind of step between runs`,
        "name",
      );
    }
    return found;
  }

  /** The result as saved: JSON text, null for undefined. Refused before anything is written. */
  private jsonOf(name: string, value: unknown): string | null {
    if (value === undefined) return null;
    if (value === null) return "null";
    let json: string;
    try {
      json = toJsonText(value, `ctx.step(${JSON.stringify(name)}) result`)!;
    } catch (error) {
      throw error instanceof JobError ? new StepError(error.message, "result") : error;
    }
    const limit = this.scope.db.settings.maxResultBytes;
    if (json.length * 3 > limit && Buffer.byteLength(json) > limit) {
      throw new StepError(
        `ctx.step(${JSON.stringify(name)}): its result of ${Buffer.byteLength(json)} bytes is over the ${limit}-byte limit (maxResultBytes); save large data elsewhere and return a reference`,
        "result",
      );
    }
    return json;
  }

  private refused(name: string, kind: StepKind): JobAbortedError {
    this.scope.fenced(kind === "sleep" ? "sleep" : "step");
    return new JobAbortedError(
      "lease-lost",
      `${CALLS[kind]}(${JSON.stringify(name)}): job ${this.scope.job.id} was taken over or cancelled; this run no longer owns it, so nothing was saved`,
    );
  }
}

/** An invoked child's answer as `ctx.invoke` hands it back: its result, or its failure thrown. */
function answered(name: string, child: ChildAnswer): unknown {
  if (child.status === "done") return child.result;
  throw new ChildJobError(name, child);
}

/** A saved result as the step hands it back: the same value on the first run and on every replay. */
function parsed(json: string | null): unknown {
  return json === null ? undefined : (JSON.parse(json) as unknown);
}

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : value === null ? "null" : typeof value;
}
