// Prometheus metrics: the OpenTelemetry metrics @forge/jobs already emits, exposed as
// `/metrics` in the Prometheus text format by @opentelemetry/exporter-prometheus. The web
// process serves them on its own port (and observes the queues' depth); the worker on
// METRICS_PORT (it has no HTTP server of its own).
import { metrics } from "@opentelemetry/api";
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import { AggregationType, MeterProvider } from "@opentelemetry/sdk-metrics";

export interface Metrics {
  exporter: PrometheusExporter;
  /** Stops the exporter's server (if any) and unregisters the provider. */
  shutdown(): Promise<void>;
}

// The SDK's default buckets are made for milliseconds; the queue's durations are in seconds.
const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/**
 * Registers the process's global MeterProvider with a Prometheus reader. `port`: the exporter
 * listens there itself (the worker); without it, serve `exporter.getMetricsRequestHandler`
 * from the app's own routes (the web process).
 */
export async function startMetrics(options: { port?: number | undefined; host?: string } = {}): Promise<Metrics> {
  const exporter = new PrometheusExporter(
    options.port === undefined ? { preventServerStart: true } : { port: options.port, host: options.host ?? "127.0.0.1", preventServerStart: true },
  );
  // Started here rather than by the constructor, so a busy port is an error the caller sees.
  if (options.port !== undefined) await exporter.startServer();
  const provider = new MeterProvider({
    readers: [exporter],
    views: [
      { instrumentName: "forge_jobs.execution.duration", aggregation: { type: AggregationType.EXPLICIT_BUCKET_HISTOGRAM, options: { boundaries: SECONDS } } },
      { instrumentName: "forge_jobs.wait.duration", aggregation: { type: AggregationType.EXPLICIT_BUCKET_HISTOGRAM, options: { boundaries: SECONDS } } },
    ],
  });
  metrics.setGlobalMeterProvider(provider);
  return {
    exporter,
    async shutdown() {
      await provider.shutdown();
      metrics.disable();
    },
  };
}
