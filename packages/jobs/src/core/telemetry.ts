import { createRequire } from "node:module";
import type * as Otel from "@opentelemetry/api";
import type { WorkerEmitter } from "./events.js";
import type { JobInfo } from "../base/types.js";

/**
 * OpenTelemetry through `@opentelemetry/api` only, an optional peer: when it is not installed,
 * or no SDK is registered, every function here costs a property read and does nothing.
 */
let api: typeof Otel | null | undefined;

export function otelApi(): typeof Otel | null {
  if (api === undefined) {
    try {
      api = createRequire(import.meta.url)("@opentelemetry/api") as typeof Otel;
    } catch {
      api = null;
    }
  }
  return api;
}

const SCOPE = "@forge/jobs";

/**
 * Whether an SDK is registered: the API's own providers are no-ops until one is, and making
 * no-op spans and records for every job costs a few percent of a busy worker's CPU.
 */
function registered(provider: object): boolean {
  const delegate = (provider as { getDelegate?: () => object }).getDelegate?.() ?? provider;
  return !/^Noop/.test(delegate.constructor?.name ?? "");
}

/** The enqueuing span's identity, stored with the job so its execution can link back to it. */
export interface StoredTraceContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
}

interface Instruments {
  enqueued: Otel.Counter;
  succeeded: Otel.Counter;
  failed: Otel.Counter;
  retried: Otel.Counter;
  snoozed: Otel.Counter;
  reclaimed: Otel.Counter;
  duration: Otel.Histogram;
  wait: Otel.Histogram;
}

// Instruments are tied to the meter provider registered at the time: rebuild them when the
// application registers (or replaces) its provider after this module loaded.
let cached: { provider: unknown; instruments: Instruments } | undefined;

function instruments(otel: typeof Otel): Instruments {
  const provider = otel.metrics.getMeterProvider();
  if (cached?.provider !== provider) {
    const meter = provider.getMeter(SCOPE);
    cached = {
      provider,
      instruments: {
        enqueued: meter.createCounter("forge_jobs.enqueued", { description: "Jobs enqueued" }),
        succeeded: meter.createCounter("forge_jobs.succeeded", { description: "Job runs that succeeded" }),
        failed: meter.createCounter("forge_jobs.failed", { description: "Job runs that failed (retried or not)" }),
        retried: meter.createCounter("forge_jobs.retried", { description: "Failed runs scheduled for another attempt" }),
        snoozed: meter.createCounter("forge_jobs.snoozed", { description: "Runs that snoozed: back to pending, attempt given back" }),
        reclaimed: meter.createCounter("forge_jobs.reclaimed", { description: "Jobs taken back from lost workers" }),
        duration: meter.createHistogram("forge_jobs.execution.duration", { unit: "s", description: "Handler run time" }),
        wait: meter.createHistogram("forge_jobs.wait.duration", { unit: "s", description: "Time from runnable to started" }),
      },
    };
  }
  return cached.instruments;
}

function attributes(job: { queue: string; task: string }): Otel.Attributes {
  return { "forge_jobs.queue": job.queue, "forge_jobs.task": job.task };
}

export function countEnqueued(jobs: readonly { queue: string; task: string }[]): void {
  const otel = otelApi();
  if (!otel || !registered(otel.metrics.getMeterProvider())) return;
  const counter = instruments(otel).enqueued;
  for (const job of jobs) counter.add(1, attributes(job));
}

/** Metrics from a worker's own events: one subscription, no code in the hot path. */
export function instrumentEmitter(emitter: WorkerEmitter): void {
  const otel = otelApi();
  if (!otel) return;
  // Checked per event, not once: an application may register its SDK after starting workers.
  const active = () => registered(otel.metrics.getMeterProvider());
  emitter.on("job:started", (e) => active() && instruments(otel).wait.record(e.waitMs / 1000, attributes(e.job)));
  emitter.on("job:succeeded", (e) => {
    if (!active()) return;
    const m = instruments(otel);
    m.succeeded.add(1, attributes(e.job));
    m.duration.record(e.durationMs / 1000, attributes(e.job));
  });
  emitter.on("job:failed", (e) => {
    if (!active()) return;
    const m = instruments(otel);
    m.failed.add(1, { ...attributes(e.job), "forge_jobs.will_retry": e.willRetry });
    m.duration.record(e.durationMs / 1000, attributes(e.job));
  });
  emitter.on("job:retried", (e) => active() && instruments(otel).retried.add(1, attributes(e.job)));
  emitter.on("job:snoozed", (e) => active() && instruments(otel).snoozed.add(1, attributes(e.job)));
  emitter.on("job:reclaimed", (e) => active() && instruments(otel).reclaimed.add(1, { ...attributes(e.job), "forge_jobs.status": e.job.status }));
}

/** Runs `fn` inside a PRODUCER span and hands it the span's context to store with the jobs. */
export async function withEnqueueSpan<T>(task: string, queue: string, count: number, fn: (trace: StoredTraceContext | null) => Promise<T>): Promise<T> {
  const otel = otelApi();
  if (!otel || !registered(otel.trace.getTracerProvider())) return fn(null);
  const tracer = otel.trace.getTracer(SCOPE);
  return tracer.startActiveSpan(
    count === 1 ? `enqueue ${task}` : `enqueue ${count} jobs`,
    { kind: otel.SpanKind.PRODUCER, attributes: { ...attributes({ queue, task }), "forge_jobs.count": count } },
    async (span) => {
      try {
        const context = span.spanContext();
        const stored = otel.isSpanContextValid(context) ? { traceId: context.traceId, spanId: context.spanId, traceFlags: context.traceFlags } : null;
        return await fn(stored);
      } catch (error) {
        span.recordException(error as Error);
        span.setStatus({ code: otel.SpanStatusCode.ERROR, message: (error as Error).message });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/**
 * Runs a job inside a CONSUMER span linked to its enqueuing span, so a trace crosses from the
 * HTTP request to the worker. `fn` reports whether the run failed; it never throws.
 */
export async function withExecutionSpan<T>(job: JobInfo, stored: unknown, fn: () => Promise<T>, errorOf: (outcome: T) => unknown): Promise<T> {
  const otel = otelApi();
  if (!otel || !registered(otel.trace.getTracerProvider())) return fn();
  const link = asStoredContext(stored);
  const tracer = otel.trace.getTracer(SCOPE);
  return tracer.startActiveSpan(
    `process ${job.task}`,
    {
      kind: otel.SpanKind.CONSUMER,
      links: link ? [{ context: { ...link, isRemote: true } }] : [],
      attributes: { ...attributes(job), "forge_jobs.job_id": job.id, "forge_jobs.attempt": job.attempt, "forge_jobs.max_attempts": job.maxAttempts },
    },
    async (span) => {
      try {
        const outcome = await fn();
        const error = errorOf(outcome);
        if (error !== undefined) {
          span.recordException(error instanceof Error ? error : new Error(String(error)));
          span.setStatus({ code: otel.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
        }
        return outcome;
      } finally {
        span.end();
      }
    },
  );
}

function asStoredContext(value: unknown): StoredTraceContext | null {
  if (typeof value !== "object" || value === null) return null;
  const { traceId, spanId, traceFlags } = value as Partial<StoredTraceContext>;
  return typeof traceId === "string" && typeof spanId === "string" && typeof traceFlags === "number" ? { traceId, spanId, traceFlags } : null;
}
