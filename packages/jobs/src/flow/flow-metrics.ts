import type * as Otel from "@opentelemetry/api";
import { resolveDb } from "../core/connect.js";
import { listLimits } from "./limits.js";
import { type DatabaseOptions } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { otelApi } from "../core/telemetry.js";

/**
 * Flow control as OpenTelemetry observable gauges, read from the database when the metrics SDK
 * collects: `forge_jobs.limit.running` and `forge_jobs.limit.throttled`, per stored limit
 * (attribute `forge_jobs.limit_key`, the exact key or the pattern). Per limit, not per key: a
 * pattern such as `org:*` may match thousands of keys, one time series each would swamp the
 * metrics backend. Returns a function that stops it; does nothing without `@opentelemetry/api`.
 * Register it in one process, like `observeQueueDepth`.
 */
export function observeFlowControl(options: DatabaseOptions = {}): () => void {
  checkOptions(options, DATABASE_OPTION_KEYS, "observeFlowControl");
  const otel = otelApi();
  if (!otel) return () => undefined;
  const db = resolveDb(options.db);
  const meter = otel.metrics.getMeter("@forge/jobs");
  const running = meter.createObservableGauge("forge_jobs.limit.running", { description: "Running jobs of the keys a limit governs" });
  const throttled = meter.createObservableGauge("forge_jobs.limit.throttled", {
    description: "Ready jobs a concurrency limit or a rate holds back now",
  });
  const observables = [running, throttled];
  const callback: Otel.BatchObservableCallback = async (result) => {
    for (const limit of await listLimits({ db })) {
      const attributes = { "forge_jobs.limit_key": limit.key };
      result.observe(running, limit.running, attributes);
      result.observe(throttled, limit.throttled, attributes);
    }
  };
  meter.addBatchObservableCallback(callback, observables);
  return () => meter.removeBatchObservableCallback(callback, observables);
}
