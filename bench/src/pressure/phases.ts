import type { ChildProcess } from "node:child_process";
import { performance } from "node:perf_hooks";
import type pg from "pg";
import { median, percentile, sleep, sorted } from "../lib/stats.js";
import type { ChildMessage, ParentMessage } from "./child.js";
import { holdXid, startReaders, type Pressure } from "./pressures.js";
import { liveBytes, tableStats, type TableStat } from "./stats.js";

/** The phases of one system's run, in order: clean, then each pressure and its recovery. */
export const PRESSURES = [
  { key: "idle-xid", label: "(a) idle transaction holding an XID" },
  { key: "readers", label: "(b) 4 REPEATABLE READ readers" },
  { key: "high-load", label: "(c) 1.5× the offered rate" },
] as const;
export type PressureKey = (typeof PRESSURES)[number]["key"];

/** What one phase measured for one system. */
export interface PhaseResult {
  phase: "warm-up" | "clean" | PressureKey | `recovery after ${PressureKey}`;
  seconds: number;
  offeredPerS: number;
  enqueuedPerS: number;
  /** Completions per second over the phase's 5 s windows: median and lowest. */
  donePerSMedian: number;
  donePerSLowest: number;
  pickupP50: number | null;
  pickupP99: number | null;
  enqueueErrors: number;
  /** Jobs not finished (waiting or running) at the phase's end. */
  backlog: number;
  /** Size of the queue table(s) at the phase's end. */
  liveBytes: number;
  tables: TableStat[];
  /** Recovery phases: seconds from its start until the queue table(s) were under 2× their clean size (null: not within the phase). */
  under2xCleanAfterS?: number | null;
  pressure?: string;
}

/** Everything the phases need to talk to one system. */
export interface SystemRun {
  child: ChildProcess;
  /** A connection to the system's own database, for statistics and sizes. */
  client: pg.Client;
  url: string;
  schema: string;
  hot: string[];
  rate: number;
  windowS: number;
}

/** Sends `message` and waits for the child's next message. */
export function ask(child: ChildProcess, message: ParentMessage): Promise<ChildMessage> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`pressure child exited with ${code}`));
    child.once("exit", onExit);
    child.once("message", (reply: ChildMessage) => {
      child.off("exit", onExit);
      resolve(reply);
    });
    child.send(message);
  });
}

async function take(run: SystemRun, backlog: boolean) {
  const reply = await ask(run.child, { type: "take", backlog });
  if (reply.type !== "window") throw new Error(`expected a window, got ${reply.type}`);
  return reply;
}

/**
 * Runs one phase of `seconds` at `rate` jobs/s. `cleanBytes` (recovery phases) turns on the
 * per-window size check. Prints one line per window.
 */
export async function runPhase(
  run: SystemRun,
  phase: PhaseResult["phase"],
  seconds: number,
  options: { rate: number; pressure?: PressureKey; cleanBytes?: number },
): Promise<PhaseResult> {
  run.child.send({ type: "rate", rate: options.rate } satisfies ParentMessage);
  let pressure: Pressure | null = null;
  if (options.pressure === "idle-xid") pressure = await holdXid(run.url);
  else if (options.pressure === "readers") pressure = await startReaders(run.url, run.hot, 4);
  await take(run, false);
  const started = performance.now();
  const rates: number[] = [];
  const pickups: number[] = [];
  let enqueued = 0;
  let errors = 0;
  let under: number | null = null;
  let backlog = 0;
  for (let k = 1; ; k++) {
    const end = Math.min(k * run.windowS, seconds);
    await sleep(started + end * 1000 - performance.now());
    const isLast = end >= seconds;
    const w = await take(run, isLast);
    const length = end - Math.min((k - 1) * run.windowS, seconds);
    rates.push(w.completed / length);
    for (const p of w.pickups) pickups.push(p);
    enqueued += w.enqueued;
    errors += w.enqueueErrors;
    if (options.cleanBytes !== undefined && under === null && (await liveBytes(run.client, run.hot)) < 2 * options.cleanBytes) under = end;
    console.log(
      `    ${phase.padEnd(26)} ${String(end).padStart(4)} s  done ${String(Math.round(w.completed / length)).padStart(5)}/s  enqueued ${String(Math.round(w.enqueued / length)).padStart(5)}/s`,
    );
    if (isLast) {
      backlog = w.backlog ?? 0;
      break;
    }
  }
  // Sizes and dead tuples while the pressure is still on: what it left at the phase's end.
  const bytes = await liveBytes(run.client, run.hot);
  const tables = await tableStats(run.client, run.schema);
  const said = pressure ? await pressure.end() : undefined;
  const s = sorted(pickups);
  const result: PhaseResult = {
    phase,
    seconds,
    offeredPerS: options.rate,
    enqueuedPerS: enqueued / seconds,
    donePerSMedian: median(rates),
    donePerSLowest: Math.min(...rates),
    pickupP50: s.length ? percentile(s, 50) : null,
    pickupP99: s.length ? percentile(s, 99) : null,
    enqueueErrors: errors,
    backlog,
    liveBytes: bytes,
    tables,
  };
  if (options.cleanBytes !== undefined) result.under2xCleanAfterS = under;
  if (said) result.pressure = said;
  return result;
}
