import { readdirSync, readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { PG_URL } from "./env.js";

/**
 * Client-side accounting of every statement sent through node-postgres in this process. All
 * the PostgreSQL systems here (ours, graphile-worker, pg-boss, raw) resolve to the same `pg`
 * module, so one patch on Client.prototype.query counts each round trip once, whoever sends it.
 * The harness's own client is flagged and left out.
 */
export const counters = { statements: 0 };
export interface StatementStats {
  count: number;
  ms: number;
  /** The first call of this kind, to replay under EXPLAIN. */
  text: string;
  values: unknown[] | undefined;
}
let detail: Map<string, StatementStats> | null = null;

const ADMIN = Symbol.for("forge.bench.admin");

export function installStatementCounter(): void {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown; __benchPatched?: boolean };
  if (proto.__benchPatched) return;
  proto.__benchPatched = true;
  const original = proto.query;
  proto.query = function (this: Record<symbol, unknown>, ...args: unknown[]) {
    if (this[ADMIN]) return original.apply(this, args);
    counters.statements++;
    if (!detail) return original.apply(this, args);
    const first = args[0] as string | { text?: string; name?: string; values?: unknown[]; callback?: unknown } | undefined;
    const text = typeof first === "string" ? first : (first?.text ?? "");
    const values = typeof first === "string" ? (Array.isArray(args[1]) ? (args[1] as unknown[]) : undefined) : first?.values;
    const key = classify(text);
    const started = performance.now();
    const record = () => {
      const entry = detail?.get(key) ?? { count: 0, ms: 0, text, values };
      entry.count++;
      entry.ms += performance.now() - started;
      detail?.set(key, entry);
    };
    const last = args.length - 1;
    if (typeof args[last] === "function") {
      const cb = args[last] as (...a: unknown[]) => void;
      args[last] = (...a: unknown[]) => {
        record();
        cb(...a);
      };
      return original.apply(this, args);
    }
    if (first && typeof first === "object" && typeof first.callback === "function") {
      const cb = first.callback as (...a: unknown[]) => void;
      first.callback = (...a: unknown[]) => {
        record();
        cb(...a);
      };
      return original.apply(this, args);
    }
    const result = original.apply(this, args) as { then?: (a: () => void, b: () => void) => void } | undefined;
    if (result && typeof result.then === "function") result.then(record, record);
    return result;
  };
}

/** A short, schema-free label for a statement. */
export function classify(sql: string): string {
  const s = sql
    .replace(/\s+/g, " ")
    .replace(/"?bench_[a-z0-9_]+"?\./g, "")
    .trim();
  return s.length > 90 ? `${s.slice(0, 90)}…` : s;
}

export function startStatementDetail(): void {
  detail = new Map();
}

export function stopStatementDetail(): Map<string, StatementStats> {
  const d = detail ?? new Map();
  detail = null;
  return d;
}

/** A pg client for the harness's own reads (counts, WAL position): not counted above. */
export async function adminClient(url = PG_URL): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  (client as unknown as Record<symbol, unknown>)[ADMIN] = true;
  client.on("error", () => undefined);
  await client.connect();
  return client;
}

const TICK_MS = 10; // USER_HZ is 100 on Linux

/**
 * CPU time of every PostgreSQL process, in ms. The postmaster's cutime/cstime carry the CPU of
 * backends that exited and were reaped, so connections closed mid-run are not lost.
 */
export function postgresCpuMs(): number {
  let ticks = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue;
    }
    const open = stat.indexOf("(");
    const close = stat.lastIndexOf(")");
    const comm = stat.slice(open + 1, close);
    if (!comm.startsWith("postgres")) continue;
    const fields = stat.slice(close + 2).split(" ");
    // fields[0] is state (field 3); utime = field 14 → index 11, stime 12, cutime 13, cstime 14
    ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  }
  return ticks * TICK_MS;
}

export interface Snapshot {
  at: number;
  statements: number;
  nodeCpuMs: number;
  pgCpuMs: number;
  walLsn: string;
}

export async function snapshot(admin: pg.Client): Promise<Snapshot> {
  const { rows } = await admin.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn");
  const cpu = process.cpuUsage();
  return {
    at: performance.now(),
    statements: counters.statements,
    nodeCpuMs: (cpu.user + cpu.system) / 1000,
    pgCpuMs: postgresCpuMs(),
    walLsn: rows[0]!.lsn,
  };
}

export interface Costs {
  statementsPerJob: number;
  nodeCpuUsPerJob: number;
  pgCpuUsPerJob: number;
  walBytesPerJob: number;
}

export async function costs(admin: pg.Client, from: Snapshot, to: Snapshot, jobs: number): Promise<Costs> {
  const { rows } = await admin.query<{ bytes: string }>("SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS bytes", [to.walLsn, from.walLsn]);
  return {
    statementsPerJob: (to.statements - from.statements) / jobs,
    nodeCpuUsPerJob: ((to.nodeCpuMs - from.nodeCpuMs) * 1000) / jobs,
    pgCpuUsPerJob: ((to.pgCpuMs - from.pgCpuMs) * 1000) / jobs,
    walBytesPerJob: Number(rows[0]!.bytes) / jobs,
  };
}

function cpuTimes(): { busy: number; total: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** Share of the machine's CPU in use over `ms` (by anyone). */
export async function machineBusy(ms = 300): Promise<number> {
  const a = cpuTimes();
  await new Promise((r) => setTimeout(r, ms));
  const b = cpuTimes();
  return (b.busy - a.busy) / Math.max(1, b.total - a.total);
}

export const quietStats = { runs: 0, waitedMs: 0, noisy: 0, budgetMs: Infinity };

/**
 * Other work on this machine (tests of other packages, say) skews whatever runs at that moment.
 * Before a measured run, while nothing of ours runs, wait (up to `maxWaitMs`) for the machine to
 * be mostly idle, within a total budget per invocation; a run that starts on a busy machine
 * anyway is counted as noisy.
 */
export async function waitQuiet(maxWaitMs: number, threshold = 0.25): Promise<void> {
  quietStats.runs++;
  const t0 = Date.now();
  for (;;) {
    const busy = await machineBusy();
    if (busy < threshold) break;
    if (Date.now() - t0 > maxWaitMs || quietStats.waitedMs + (Date.now() - t0) > quietStats.budgetMs) {
      quietStats.noisy++;
      break;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  quietStats.waitedMs += Date.now() - t0;
}
