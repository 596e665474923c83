import type * as Otel from "@opentelemetry/api";
import { resolveDb } from "../core/connect.js";
import { type DatabaseOptions } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { statusCounts } from "./status.js";
import { otelApi } from "../core/telemetry.js";

/**
 * Queue depth as OpenTelemetry observable gauges, read from the database when the metrics SDK
 * collects: `forge_jobs.queue.ready`, `forge_jobs.queue.running` and
 * `forge_jobs.queue.oldest_ready_age` (seconds), per queue. Returns a function that stops it.
 * Does nothing without `@opentelemetry/api`. Register it in one process (say, the web app), not
 * in every worker: each collection runs one read-only query.
 */
export function observeQueueDepth(options: DatabaseOptions = {}): () => void {
  checkOptions(options, DATABASE_OPTION_KEYS, "observeQueueDepth");
  const otel = otelApi();
  if (!otel) return () => undefined;
  const db = resolveDb(options.db);
  const meter = otel.metrics.getMeter("@forge/jobs");
  const ready = meter.createObservableGauge("forge_jobs.queue.ready", { description: "Pending jobs runnable now" });
  const running = meter.createObservableGauge("forge_jobs.queue.running", { description: "Jobs being run" });
  const oldest = meter.createObservableGauge("forge_jobs.queue.oldest_ready_age", { unit: "s", description: "Age of the oldest ready job" });
  const observables = [ready, running, oldest];
  const callback: Otel.BatchObservableCallback = async (result) => {
    for (const status of await statusCounts({ db })) {
      const attributes = { "forge_jobs.queue": status.queue };
      result.observe(ready, status.ready, attributes);
      result.observe(running, status.counts.running, attributes);
      result.observe(oldest, status.oldestReadyAge ?? 0, attributes);
    }
  };
  meter.addBatchObservableCallback(callback, observables);
  return () => meter.removeBatchObservableCallback(callback, observables);
}
