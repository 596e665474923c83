/**
 * One worker process of the rate-limit measure: loads @forge/jobs, says "ready", runs a worker
 * (the given concurrency, defaults otherwise) from "go" until "stop", then sends back the time
 * (epoch ms, sub-millisecond) at which its handler started each job.
 */
import { performance } from "node:perf_hooks";
import { loadForge } from "./forge.js";

const [url, schema, concurrencyText] = process.argv.slice(2);
const forge = await loadForge();
const starts: number[] = [];
let stop: (() => Promise<void>) | null = null;

process.on("message", (message: { type: string }) => {
  if (message.type === "go") {
    const db = forge.connect(url!, schema ? { schema } : {});
    const controller = new AbortController();
    const running = forge.runWorker(
      { rate: () => void starts.push(performance.timeOrigin + performance.now()) },
      { db, concurrency: Number(concurrencyText), signal: controller.signal },
    );
    stop = async () => {
      controller.abort();
      await running;
      await db.close();
    };
  } else if (message.type === "stop") {
    void (stop ?? (async () => undefined))().then(() => {
      process.send!({ type: "stopped", starts }, () => process.exit(0));
    });
  }
});
process.send!({ type: "ready" });
