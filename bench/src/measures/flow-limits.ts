import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { loadForge } from "../forge.js";
import { SCHEMA } from "../lib/env.js";
import type { Row } from "../lib/report.js";
import { rotate, sleep } from "../lib/stats.js";
import { ForgeSystem } from "../systems/forge.js";
import { flowApi, FlowForge, withFlowOptions, type FlowApi } from "../systems/flow.js";
import type { Payload } from "../systems/types.js";
import { addCosts, addSample, COST_COLUMNS, processingRun, settle, type Ctx } from "./common.js";
import { BACKEND_TITLE, BACKENDS, forgeTarget, type ForgeTarget } from "./flow-backends.js";
import { forkReady } from "./scale.js";

const CHILD = fileURLToPath(new URL("../flow-child.ts", import.meta.url));
export const RATE_KEY = "rate:test";
export const RATE = { limit: 50, perSeconds: 1, burst: 1 };
export const RATE_PROCESSES = 4;
const RATE_CONCURRENCY = 10;
/** Measured from this long after the first start, so every process is up. */
const RATE_STARTUP_MS = 1000;
const COST_CONCURRENCY = 10;
const KEY_LIMIT = 5;

const missing = "setLimit / removeLimit are not exported by @forge/jobs in this tree yet (issue 14 lands them)";

function stopChildren(children: ChildProcess[]): Promise<number[]> {
  return Promise.all(
    children.map(
      (child) =>
        new Promise<number[]>((resolve) => {
          child.removeAllListeners("exit");
          child.once("message", (m: { starts: number[] }) => resolve(m.starts));
          child.send({ type: "stop" });
        }),
    ),
  ).then((all) => all.flat().sort((a, b) => a - b));
}

/**
 * One key limited to 50 jobs/s with burst 1, a backlog of no-op jobs on it, and 4 worker
 * processes (concurrency 10 each) for `flowRateSeconds` after one second of start-up: the
 * handler starts per second in that window, and the most and fewest in any whole second of it.
 */
export async function rateAccuracy(ctx: Ctx, targets: ForgeTarget[]): Promise<void> {
  const forge = await loadForge();
  const api = flowApi(forge);
  if (!api) {
    ctx.skip("flow rate limit", missing);
    return;
  }
  const seconds = ctx.sizes.flowRateSeconds;
  const rows: Row[] = [];
  for (const target of targets) {
    const sys = new FlowForge(target.backend, target.url, target.schema, target.admin);
    try {
      await sys.prepare();
    } catch (error) {
      ctx.skip(`flow rate limit (${target.backend})`, (error as Error).message);
      continue;
    }
    const row: Row = {
      system: target.backend,
      label: `@forge/jobs on ${BACKEND_TITLE[target.backend]}`,
      config: `setLimit("${RATE_KEY}", { rate: { limit: ${RATE.limit}, perSeconds: ${RATE.perSeconds}, burst: ${RATE.burst} } }); ${RATE_PROCESSES} processes × runWorker({ concurrency: ${RATE_CONCURRENCY} }) with its defaults`,
      samples: {},
    };
    rows.push(row);
    try {
      await api.setLimit(RATE_KEY, { rate: RATE }, { db: sys.db });
      const jobs = RATE.limit * (seconds + 5) + 500;
      for (let r = 0; r < Math.min(ctx.sizes.flowRounds, ctx.sizes.backendRounds); r++) {
        process.stdout.write(`  flow rate ${target.backend} round ${r + 1}:`);
        await sys.reset();
        for (let i = 0; i < jobs; i += 1000)
          await sys.forge.enqueueMany(
            Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => withFlowOptions({ task: "rate", payload: { i: i + k } }, { concurrencyKey: RATE_KEY })),
            { db: sys.db },
          );
        const children = await forkReady(CHILD, [target.url, target.schema ?? "", String(RATE_CONCURRENCY)], RATE_PROCESSES, "flow worker");
        let starts: number[];
        try {
          await settle(target.backend === "postgres" ? ctx.admin : null);
          for (const child of children) child.send({ type: "go" });
          await sleep(RATE_STARTUP_MS + seconds * 1000 + 2000);
        } finally {
          starts = await stopChildren(children);
        }
        const from = (starts[0] ?? 0) + RATE_STARTUP_MS;
        const perSecond = Array.from({ length: seconds }, () => 0);
        for (const t of starts) {
          const s = Math.floor((t - from) / 1000);
          if (s >= 0 && s < seconds) perSecond[s]!++;
        }
        const rate = perSecond.reduce((a, b) => a + b, 0) / seconds;
        addSample(row, "jobs/s", rate);
        addSample(row, "max 1 s", Math.max(...perSecond));
        addSample(row, "min 1 s", Math.min(...perSecond));
        if (starts.length >= jobs) row.note = "the backlog ran out";
        process.stdout.write(` ${rate.toFixed(1)}/s (1 s windows ${Math.min(...perSecond)}–${Math.max(...perSecond)})\n`);
      }
      await api.removeLimit(RATE_KEY, { db: sys.db });
    } catch (error) {
      ctx.skip(`flow rate limit (${target.backend})`, `failed: ${(error as Error).stack}`);
      rows.pop();
    } finally {
      await sys.reset().catch(() => undefined);
      await sys.close().catch(() => undefined);
    }
  }
  if (!rows.length) return;
  ctx.publish({
    id: "flow-rate",
    title: `Rate limit accuracy: one key at ${RATE.limit}/s (burst ${RATE.burst}), ${RATE_PROCESSES} worker processes, ${seconds} s`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    costColumns: ["max 1 s", "min 1 s"],
    ref: "postgres",
    rows,
    notes: [
      `Target 48–52 jobs/s. Handler starts (no-op jobs) counted by each process, from ${RATE_STARTUP_MS / 1000} s after the first start for ${seconds} s; max/min 1 s = the most and fewest starts in one whole second of that window. ÷ ours = ÷ the PostgreSQL row.`,
    ],
  });
}

/** Ours with every job on one of `keys` concurrency keys, each limited by the pattern `k:*`. */
class KeyedForgeSystem extends ForgeSystem {
  constructor(
    target: ForgeTarget,
    private readonly api: FlowApi,
    private readonly keys: number,
  ) {
    super("forge-keyed", "@forge/jobs", target.backend, target.url, target.schema, target.admin);
  }

  override describe(): string {
    return `setLimit("k:*", { concurrency: ${KEY_LIMIT} }); jobs spread over ${this.keys} concurrencyKeys k:0…k:${this.keys - 1}; runWorker with its defaults`;
  }

  override async prepare(): Promise<void> {
    await super.prepare();
    await this.api.setLimit("k:*", { concurrency: KEY_LIMIT }, { db: this.db });
  }

  override async enqueueBulk(payloads: Payload[]): Promise<void> {
    await this.forge.enqueueMany(
      payloads.map((payload) => withFlowOptions({ task: "noop", payload }, { concurrencyKey: `k:${payload.i % this.keys}` })),
      { db: this.db },
    );
  }
}

/**
 * The processing measure (no-op jobs enqueued in bulk, then a worker at concurrency 10, until
 * none is unfinished) with flow control unused, against every job on one of 1,000 keys each
 * limited, in separate schemas/files/databases; ÷ unused per round.
 */
export async function costOfFlowControl(ctx: Ctx): Promise<void> {
  const api = flowApi(await loadForge());
  if (!api) {
    ctx.skip("flow cost", missing);
    return;
  }
  const { flowCostJobs: n, flowKeys: keys, runTimeoutS } = ctx.sizes;
  const rows: Row[] = [];
  for (const backend of BACKENDS) {
    let plain: ForgeTarget;
    let keyed: ForgeTarget;
    try {
      plain = await forgeTarget(ctx.admin, backend, SCHEMA.forgeFlowUnused);
      keyed = await forgeTarget(ctx.admin, backend, SCHEMA.forgeFlowKeyed);
    } catch (error) {
      ctx.skip(`flow cost (${backend})`, `${backend} is not reachable: ${(error as Error).message}`);
      continue;
    }
    const unused = new ForgeSystem("forge", "@forge/jobs", backend, plain.url, plain.schema, plain.admin);
    const limited = new KeyedForgeSystem(keyed, api, keys);
    try {
      await unused.prepare();
      await limited.prepare();
      const entries = [
        {
          sys: unused,
          row: { system: `${backend}:unused`, label: `${BACKEND_TITLE[backend]}, flow control unused`, config: unused.describe(), samples: {} } as Row,
        },
        {
          sys: limited,
          row: { system: `${backend}:keyed`, label: `${BACKEND_TITLE[backend]}, ${keys} keys each limited`, config: limited.describe(), samples: {} } as Row,
        },
      ];
      for (let r = 0; r < ctx.sizes.flowRounds; r++) {
        process.stdout.write(`  flow cost ${backend} round ${r + 1}:`);
        const rates = new Map<string, number>();
        for (const { sys, row } of rotate(entries, r)) {
          const res = await processingRun(sys, "default", COST_CONCURRENCY, n, runTimeoutS, backend === "postgres" ? ctx.admin : null);
          rates.set(row.system, res.rate);
          addSample(row, "jobs/s", res.rate);
          addCosts(row, res.costs);
          if (res.timedOut) row.note = `rate over a ${runTimeoutS} s window: ${res.processed}/${n} done`;
          process.stdout.write(` ${row.system} ${Math.round(res.rate)}`);
        }
        addSample(entries[1]!.row, "÷ unused", rates.get(`${backend}:keyed`)! / rates.get(`${backend}:unused`)!);
        process.stdout.write("\n");
      }
      rows.push(...entries.map((e) => e.row));
    } catch (error) {
      ctx.skip(`flow cost (${backend})`, `failed: ${(error as Error).stack}`);
    } finally {
      for (const sys of [unused, limited]) {
        await sys.reset().catch(() => undefined);
        await sys.close().catch(() => undefined);
      }
      for (const t of [plain, keyed]) await t.cleanup().catch(() => undefined);
    }
  }
  if (!rows.length) return;
  ctx.publish({
    id: "flow-cost",
    title: `Cost of flow control: processing ${n} no-op jobs at concurrency ${COST_CONCURRENCY}, unused vs ${keys} keys each limited`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    costColumns: ["÷ unused", ...COST_COLUMNS],
    ref: "postgres:unused",
    rows,
    notes: [
      `As the processing measure (from the first handler call until no unfinished job is left). ÷ unused = this run ÷ the same backend's unused run of the same round (target ≥ 0.75 on PostgreSQL); ÷ ours = ÷ the PostgreSQL unused row. Costs per job on PostgreSQL only.`,
    ],
  });
}
