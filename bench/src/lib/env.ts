/** Where the databases are and how big each measure is. Override with BENCH_* variables. */
export const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
export const MARIADB_URL = process.env.BENCH_MARIADB_URL ?? "mysql://root@127.0.0.1:3306/test";
export const SQLITE_DIR = process.env.BENCH_SQLITE_DIR ?? "/tmp/forge-bench-sqlite";

/** One schema per system, so no system sees another's tables. */
export const SCHEMA = {
  forge: "bench_forge",
  forge1m: "bench_forge_1m",
  forgeScale: "bench_forge_scale",
  graphile: "bench_graphile",
  pgboss: "bench_pgboss",
  pgbossNotify: "bench_pgboss_notify",
  raw: "bench_raw",
  forgeFlow: "bench_forge_flow",
  forgeFlowUnused: "bench_forge_flow_unused",
  forgeFlowKeyed: "bench_forge_flow_keyed",
  graphileFlow: "bench_graphile_flow",
  pgbossFlow: "bench_pgboss_flow",
} as const;

export interface Sizes {
  rounds: number;
  enqueueOne: number;
  enqueueBulk: number;
  processing: number;
  concurrencies: number[];
  latencySamples: number;
  latencyRate: number;
  scaleJobs: number;
  scaleProcesses: number;
  scaleConcurrency: number;
  bloatRows: number;
  bloatJobs: number;
  backendJobs: number;
  backendEnqueueOne: number;
  backendLatencySamples: number;
  profileJobs: number;
  /** Rounds for the SQLite and MariaDB measures (they are many: kept shorter). */
  backendRounds: number;
  /** Longest wait for an idle machine before each measured run, and in all, in ms. */
  quietWaitMs: number;
  quietBudgetMs: number;
  /** A single run gives up after this many seconds (its rate is then what it managed). */
  runTimeoutS: number;
  /** Flow control (issue 14): rounds, tenant A's backlog, the ten small tenants' jobs each. */
  flowRounds: number;
  flowBacklog: number;
  flowSmallJobs: number;
  /** After the last small tenant's enqueue, how long the run waits for its jobs before it is cut. */
  flowGraceS: number;
  /** Rate-limit accuracy: seconds measured (after one second of start-up). */
  flowRateSeconds: number;
  /** Cost of flow control: no-op jobs processed at concurrency 10, and the keys they spread over. */
  flowCostJobs: number;
  flowKeys: number;
  /** The contacts import with real writes (issue 21.7): rows in the generated file. */
  importRows: number;
  /** The plain path against the baseline build (issue 36): rounds, each running both builds. */
  plainRounds: number;
}

export const FULL: Sizes = {
  rounds: 3,
  enqueueOne: 2000,
  enqueueBulk: 20000,
  processing: 20000,
  concurrencies: [1, 10, 50],
  latencySamples: 500,
  latencyRate: 50,
  // Long enough (≈ 5 s) that steady state dominates: at 40,000 jobs a run lasted ~1.5 s, and
  // the start of 8 processes (pools, LISTEN, V8 warm-up) inside the clock made 8 processes
  // look 0.66× of one; at 160,000 the same code measured 0.99×.
  scaleJobs: 160000,
  scaleProcesses: 8,
  scaleConcurrency: 50,
  bloatRows: 1_000_000,
  bloatJobs: 20000,
  backendJobs: 10000,
  backendEnqueueOne: 1000,
  backendLatencySamples: 250,
  profileJobs: 20000,
  backendRounds: 2,
  quietWaitMs: 15_000,
  quietBudgetMs: 240_000,
  runTimeoutS: 12,
  flowRounds: 2,
  flowBacklog: 100_000,
  flowSmallJobs: 100,
  flowGraceS: 5,
  flowRateSeconds: 20,
  flowCostJobs: 20000,
  flowKeys: 1000,
  importRows: 1_000_000,
  plainRounds: 7,
};

export const QUICK: Sizes = {
  rounds: 1,
  enqueueOne: 300,
  enqueueBulk: 5000,
  processing: 5000,
  concurrencies: [1, 10, 50],
  latencySamples: 100,
  latencyRate: 50,
  scaleJobs: 10000,
  scaleProcesses: 8,
  scaleConcurrency: 50,
  bloatRows: 1_000_000,
  bloatJobs: 5000,
  backendJobs: 3000,
  backendEnqueueOne: 300,
  backendLatencySamples: 50,
  profileJobs: 5000,
  backendRounds: 1,
  quietWaitMs: 1_000,
  quietBudgetMs: 15_000,
  runTimeoutS: 4,
  flowRounds: 1,
  flowBacklog: 20_000,
  flowSmallJobs: 30,
  flowGraceS: 2,
  flowRateSeconds: 5,
  flowCostJobs: 5000,
  flowKeys: 1000,
  importRows: 100_000,
  plainRounds: 2,
};

export const MEASURES = [
  "enqueue-one",
  "enqueue-bulk",
  "processing",
  "latency",
  "backends",
  "scale",
  "bloat",
  "profile",
  "flow",
  "batch",
  "ten-million",
  "history",
  "import",
  "plain-path",
] as const;
export type MeasureName = (typeof MEASURES)[number];

export interface Args {
  quick: boolean;
  only: MeasureName[] | null;
  rounds: number | null;
  save: boolean;
  render: boolean;
}

export function parseArgs(argv: string[]): Args {
  const args: Args = { quick: false, only: null, rounds: null, save: true, render: false };
  for (const arg of argv) {
    if (arg === "--") continue;
    if (arg === "--quick") args.quick = true;
    else if (arg === "--no-save") args.save = false;
    else if (arg === "--render") args.render = true;
    else if (arg.startsWith("--rounds=")) args.rounds = Number(arg.slice(9));
    else if (arg.startsWith("--only=")) {
      const names = arg.slice(7).split(",").filter(Boolean);
      for (const n of names) {
        if (!(MEASURES as readonly string[]).includes(n)) throw new Error(`unknown measure ${n}; choose from ${MEASURES.join(", ")}`);
      }
      args.only = names as MeasureName[];
    } else if (arg === "--help" || arg === "-h") {
      console.log(
        `pnpm bench [--quick] [--only=${MEASURES.join("|")}[,…]] [--rounds=N] [--no-save] | --render (rewrite BENCHMARKS.md from results/latest.json)`,
      );
      process.exit(0);
    } else throw new Error(`unknown option ${arg} (try --help)`);
  }
  return args;
}
