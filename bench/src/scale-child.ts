/**
 * One worker process of the scale measure: loads @forge/jobs, says "ready", runs a worker with
 * its defaults (but the given concurrency) from "go" until "stop", then reports how many jobs
 * its handler saw.
 */
import { loadForge } from "./forge.js";

const [url, schema, concurrencyText] = process.argv.slice(2);
const forge = await loadForge();
let seen = 0;
let stop: (() => Promise<void>) | null = null;

process.on("message", (message: { type: string }) => {
  if (message.type === "go") {
    const db = forge.connect(url!, { schema: schema! });
    const controller = new AbortController();
    const running = forge.runWorker({ noop: () => void seen++ }, { db, concurrency: Number(concurrencyText), signal: controller.signal });
    stop = async () => {
      controller.abort();
      await running;
      await db.close();
    };
  } else if (message.type === "stop") {
    void (stop ?? (async () => undefined))().then(() => {
      process.send!({ type: "stopped", seen }, () => process.exit(0));
    });
  }
});
process.send!({ type: "ready" });
