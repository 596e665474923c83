import { fork, type ChildProcess } from "node:child_process";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { PG_URL, SCHEMA } from "../lib/env.js";
import { addSample, settle, type Ctx } from "./common.js";
import type { Row } from "../lib/report.js";
import { rotate, sleep } from "../lib/stats.js";
import { ForgeSystem } from "../systems/forge.js";
import { pgForgeAdmin } from "../systems/pg-admin.js";

const CHILD = fileURLToPath(new URL("../scale-child.ts", import.meta.url));
/** tsx's loader by absolute URL, so the children start whatever the working directory. */
export const TSX = import.meta.resolve("tsx");

function spawnWorkers(count: number, concurrency: number): Promise<ChildProcess[]> {
  return Promise.all(
    Array.from({ length: count }, () => {
      const child = fork(CHILD, [PG_URL, SCHEMA.forgeScale, String(concurrency)], {
        execArgv: ["--import", TSX],
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      });
      return new Promise<ChildProcess>((resolve, reject) => {
        child.once("message", () => resolve(child));
        child.once("error", reject);
        child.once("exit", (code) => reject(new Error(`scale worker exited with ${code} before it was ready`)));
      });
    }),
  );
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
 * P worker processes (each runWorker with concurrency C, pool 10) on one PostgreSQL against one
 * such process. Processes are started and loaded first; the clock starts at "go" and stops when
 * the database holds no unfinished job.
 */
export async function run(ctx: Ctx): Promise<void> {
  const { scaleJobs: n, scaleProcesses: p, scaleConcurrency: c, rounds } = ctx.sizes;
  const sys = new ForgeSystem("forge", "@forge/jobs", "postgres", PG_URL, SCHEMA.forgeScale, pgForgeAdmin(ctx.admin));
  await sys.prepare();
  const shapes = [1, p];
  const rows = new Map<number, Row>(
    shapes.map((k) => [
      k,
      {
        system: `forge-${k}p`,
        label: `@forge/jobs, ${k} process${k > 1 ? "es" : ""} × concurrency ${c}`,
        config: `${k} × runWorker({ concurrency: ${c} }) in separate processes`,
        samples: {},
      },
    ]),
  );
  for (let r = 0; r < rounds; r++) {
    process.stdout.write(`  scale round ${r + 1}:`);
    for (const k of rotate(shapes, r)) {
      await sys.reset();
      for (let i = 0; i < n; i += 5000) await sys.enqueueBulk(Array.from({ length: Math.min(5000, n - i) }, (_, j) => ({ i: i + j })));
      const children = await spawnWorkers(k, c);
      await settle(ctx.admin);
      const t0 = performance.now();
      for (const child of children) child.send({ type: "go" });
      const deadline = t0 + ctx.sizes.runTimeoutS * 2000;
      let left = n;
      while (left > 0 && performance.now() < deadline) {
        await sleep(20);
        left = await sys.unfinished();
      }
      const seconds = (performance.now() - t0) / 1000;
      const seen = await stopWorkers(children);
      const rate = (n - left) / seconds;
      addSample(rows.get(k)!, "jobs/s", rate);
      if (left > 0) rows.get(k)!.note = `rate over a ${ctx.sizes.runTimeoutS * 2} s window`;
      if (seen < n - left) rows.get(k)!.note = `handlers saw ${seen} of ${n - left} completed`;
      process.stdout.write(` ${k}p ${Math.round(rate)}`);
    }
    process.stdout.write("\n");
  }
  await sys.close();
  const one = rows.get(1)!;
  const many = rows.get(p)!;
  ctx.publish({
    id: "scale",
    title: `Scale: ${p} worker processes vs 1, concurrency ${c} each, ${n} no-op jobs`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    ref: one.system,
    rows: [one, many],
    notes: [
      `÷ ours here = ÷ the single process. Clock from "go" (processes already loaded) until no unfinished job is left; includes each worker's start (pool, LISTEN). ${p} processes share the machine's cores with PostgreSQL.`,
    ],
  });
}
