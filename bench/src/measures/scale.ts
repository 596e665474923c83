import { fork, type ChildProcess } from "node:child_process";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { SCHEMA } from "../lib/env.js";
import type { Row } from "../lib/report.js";
import { rotate, sleep } from "../lib/stats.js";
import { ForgeSystem } from "../systems/forge.js";
import { addSample, settle, type Ctx } from "./common.js";
import { BACKEND_TITLE, forgeTarget, type ForgeTarget } from "./flow-backends.js";

const CHILD = fileURLToPath(new URL("../scale-child.ts", import.meta.url));
/** tsx's loader by absolute URL, so the children start whatever the working directory. */
export const TSX = import.meta.resolve("tsx");

type ScaleBackend = "postgres" | "mariadb";
/** The MariaDB database of this measure (PostgreSQL's schema is SCHEMA.forgeScale). */
const MARIADB_DB = "bench_forge_scale";
/**
 * MariaDB runs ours several times slower than PostgreSQL on this machine: with a matching share
 * of the jobs its runs last about as long, so the processes' start weighs the same in both.
 */
const MARIADB_JOB_SHARE = 1 / 8;
const PER_ROUND = "÷ one process";

/** 1, 2, 4 … up to `most` processes. */
function processCounts(most: number): number[] {
  const counts: number[] = [];
  for (let k = 1; k < most; k *= 2) counts.push(k);
  return [...counts, most];
}

/** "1, 2, 4 and 8". */
function spoken(counts: number[]): string {
  return counts.length > 1 ? `${counts.slice(0, -1).join(", ")} and ${counts[counts.length - 1]}` : String(counts[0]);
}

/**
 * Forks `count` processes of `script` and waits until each has said it is loaded (its first
 * message); if one fails, the others are ended. `what` names them in the error.
 */
export async function forkReady(script: string, args: string[], count: number, what: string): Promise<ChildProcess[]> {
  const children: ChildProcess[] = [];
  const ready = Array.from({ length: count }, () => {
    const child = fork(script, args, { execArgv: ["--import", TSX], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    children.push(child);
    return new Promise<void>((resolve, reject) => {
      child.once("message", () => resolve());
      child.once("error", reject);
      child.once("exit", (code) => reject(new Error(`${what} exited with ${code} before it was ready`)));
    });
  });
  const settled = await Promise.allSettled(ready);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) {
    for (const child of children) child.kill();
    throw failed.reason;
  }
  return children;
}

function stopWorkers(children: ChildProcess[]): Promise<number> {
  return Promise.all(
    children.map(
      (child) =>
        new Promise<number>((resolve) => {
          child.removeAllListeners("exit");
          child.once("message", (m: { seen: number }) => resolve(m.seen));
          child.send({ type: "stop" });
        }),
    ),
  ).then((seen) => seen.reduce((a, b) => a + b, 0));
}

/**
 * P worker processes (each runWorker with concurrency C, defaults otherwise) on one database, for
 * P = 1, 2, 4 … scaleProcesses, on PostgreSQL and on MariaDB. Processes are started and loaded
 * first; the clock starts at "go" and stops when the database holds no unfinished job.
 */
export async function run(ctx: Ctx): Promise<void> {
  await backend(ctx, "postgres", SCHEMA.forgeScale, ctx.sizes.scaleJobs);
  await backend(ctx, "mariadb", MARIADB_DB, Math.round(ctx.sizes.scaleJobs * MARIADB_JOB_SHARE));
}

async function backend(ctx: Ctx, name: ScaleBackend, schema: string, n: number): Promise<void> {
  const { scaleProcesses, scaleConcurrency: c, rounds, runTimeoutS } = ctx.sizes;
  const title = BACKEND_TITLE[name];
  let target: ForgeTarget;
  try {
    target = await forgeTarget(ctx.admin, name, schema);
  } catch (error) {
    ctx.skip(`scale (${name})`, `${title} is not reachable: ${(error as Error).message.split("\n")[0]}`);
    return;
  }
  const sys = new ForgeSystem("forge", "@forge/jobs", name, target.url, target.schema, target.admin);
  try {
    await sys.prepare();
  } catch (error) {
    await target.cleanup().catch(() => undefined);
    ctx.skip(`scale (${name})`, (error as Error).message.split("\n")[0]!);
    return;
  }
  const counts = processCounts(scaleProcesses);
  const rows = new Map<number, Row>(
    counts.map((k) => [
      k,
      {
        system: `forge-${k}p`,
        label: `@forge/jobs, ${k} process${k > 1 ? "es" : ""} × concurrency ${c}`,
        config: `${k} × runWorker({ concurrency: ${c} }) in separate processes`,
        samples: {},
      },
    ]),
  );
  const windowS = runTimeoutS * 2;
  for (let r = 0; r < rounds; r++) {
    process.stdout.write(`  scale ${name} round ${r + 1}:`);
    const rates = new Map<number, number>();
    for (const k of rotate(counts, r)) {
      await sys.reset();
      for (let i = 0; i < n; i += 5000) await sys.enqueueBulk(Array.from({ length: Math.min(5000, n - i) }, (_, j) => ({ i: i + j })));
      const children = await forkReady(CHILD, [target.url, target.schema ?? "", String(c)], k, "scale worker");
      // CHECKPOINT is PostgreSQL's; MariaDB only waits for the idle machine.
      await settle(name === "postgres" ? ctx.admin : null);
      const t0 = performance.now();
      for (const child of children) child.send({ type: "go" });
      const deadline = t0 + windowS * 1000;
      let left = n;
      while (left > 0 && performance.now() < deadline) {
        await sleep(20);
        left = await sys.unfinished();
      }
      const seconds = (performance.now() - t0) / 1000;
      const seen = await stopWorkers(children);
      const rate = (n - left) / seconds;
      const row = rows.get(k)!;
      rates.set(k, rate);
      addSample(row, "jobs/s", rate);
      if (left > 0) row.note = `rate over a ${windowS} s window`;
      if (seen < n - left) row.note = `handlers saw ${seen} of ${n - left} completed`;
      process.stdout.write(` ${k}p ${Math.round(rate)}`);
    }
    // Each count against the single process of the same round, so drift between rounds cancels.
    for (const k of counts) addSample(rows.get(k)!, PER_ROUND, rates.get(k)! / rates.get(1)!);
    process.stdout.write("\n");
  }
  await sys.close();
  await target.cleanup();
  ctx.publish({
    id: name === "postgres" ? "scale" : `scale-${name}`,
    title: `Scale on ${title}: ${spoken(counts)} worker processes, concurrency ${c} each, ${n} no-op jobs`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    costColumns: [PER_ROUND],
    ref: rows.get(1)!.system,
    rows: [...rows.values()],
    notes: [
      `÷ ours here = ÷ the single process (ratio of the medians); ${PER_ROUND} = each run ÷ the single process of the same round, median over rounds. Clock from "go" (processes already loaded) until no unfinished job is left; includes each worker's start (its pool${name === "postgres" ? ", LISTEN" : ""}). Up to ${scaleProcesses} processes share the machine's cores with ${title}.`,
    ],
  });
}
