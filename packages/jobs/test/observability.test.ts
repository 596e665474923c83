import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { AggregationTemporality, MeterProvider, MetricReader, type DataPoint, type Histogram } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createWorker,
  enqueue,
  enqueueMany,
  getJob,
  JobError,
  observeFlowControl,
  observeQueueDepth,
  processOne,
  setLimit,
  type Logger,
} from "../src/index.js";
import { backends, waitFor, type TestDatabase } from "./helpers/backends.js";

class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const spans = new InMemorySpanExporter();
const reader = new TestReader();

/** Sum of a metric's data points matching the attributes. */
async function metricValue(name: string, attributes: Record<string, unknown> = {}): Promise<number> {
  const { resourceMetrics } = await reader.collect();
  let total = 0;
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      if (metric.descriptor.name !== name) continue;
      for (const point of metric.dataPoints as DataPoint<number | Histogram>[]) {
        if (!Object.entries(attributes).every(([k, v]) => point.attributes[k] === v)) continue;
        total += typeof point.value === "number" ? point.value : point.value.count;
      }
    }
  }
  return total;
}

// One SDK for the whole file (a reader binds to one provider); each backend adds its own rows,
// and every assertion is scoped by queue name, so counts from one backend never leak into another's.
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
});
afterAll(() => {
  trace.disable();
  metrics.disable();
  context.disable();
});

describe.each(backends())("observability ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t?.close());

  it("a trace crosses from the request to the worker: the execution span links to the enqueuing span", async () => {
    spans.reset();
    const tracer = trace.getTracer("test-app");
    const id = await tracer.startActiveSpan("POST /orgs/1/campaigns/7/send", async (request) => {
      const jobId = await enqueue("send_mail", { to: "ada@example.org" }, { db: t.db, queue: "traced" });
      request.end();
      return jobId;
    });
    let handlerTraceId: string | undefined;
    await processOne({ send_mail: () => void (handlerTraceId = trace.getActiveSpan()?.spanContext().traceId) }, { db: t.db, queue: "traced" });
    const finished = spans.getFinishedSpans();
    const request = finished.find((s) => s.name === "POST /orgs/1/campaigns/7/send")!;
    const enqueueSpan = finished.find((s) => s.name === "enqueue send_mail")!;
    const processSpan = finished.find((s) => s.name === "process send_mail")!;
    expect(enqueueSpan.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(enqueueSpan.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(processSpan.links).toHaveLength(1);
    expect(processSpan.links[0]!.context).toMatchObject({ traceId: enqueueSpan.spanContext().traceId, spanId: enqueueSpan.spanContext().spanId });
    expect(processSpan.attributes).toMatchObject({
      "forge_jobs.job_id": id,
      "forge_jobs.queue": "traced",
      "forge_jobs.task": "send_mail",
      "forge_jobs.attempt": 1,
    });
    // The handler runs inside the execution span: its own spans become children of it.
    expect(handlerTraceId).toBe(processSpan.spanContext().traceId);
  });

  it("a failed run marks its span as an error", async () => {
    spans.reset();
    await enqueue("explode", null, { db: t.db, queue: "traced-fail" });
    await processOne(
      {
        explode: () => {
          throw new Error("kaboom");
        },
      },
      { db: t.db, queue: "traced-fail" },
    );
    const span = spans.getFinishedSpans().find((s) => s.name === "process explode")!;
    expect(span.status).toMatchObject({ code: 2, message: "kaboom" });
    expect(span.events.some((e) => e.name === "exception")).toBe(true);
  });

  it("counts enqueued, succeeded, failed, retried by queue and task, and records duration and wait time", async () => {
    const queue = `metered-${backend.name}`;
    const attrs = { "forge_jobs.queue": queue, "forge_jobs.task": "m" };
    await enqueueMany(
      [
        { task: "m", payload: { ok: true } },
        { task: "m", payload: { ok: true } },
        { task: "m", payload: { ok: false }, maxAttempts: 2 },
      ],
      { db: t.db, queue },
    );
    expect(await metricValue("forge_jobs.enqueued", attrs)).toBe(3);
    const ac = new AbortController();
    const worker = createWorker(
      {
        m: (p: { ok: boolean }) => {
          if (!p.ok) throw new Error("no");
        },
      },
      { db: t.db, queue, signal: ac.signal, pollInterval: 0.05 },
    );
    let handled = 0;
    worker.on("job:succeeded", () => handled++);
    worker.on("job:failed", () => handled++);
    const running = worker.run();
    await waitFor("three runs", async () => handled === 3);
    ac.abort();
    await running;
    expect(await metricValue("forge_jobs.succeeded", attrs)).toBe(2);
    expect(await metricValue("forge_jobs.failed", attrs)).toBe(1);
    expect(await metricValue("forge_jobs.retried", attrs)).toBe(1);
    expect(await metricValue("forge_jobs.execution.duration", attrs)).toBe(3);
    expect(await metricValue("forge_jobs.wait.duration", attrs)).toBe(3);
  });

  it("observes queue depth (ready, running) as gauges read from the database", async () => {
    const queue = `gauged-${backend.name}`;
    await enqueueMany([{ task: "g" }, { task: "g" }, { task: "g", availableIn: 600 }], { db: t.db, queue });
    const stop = observeQueueDepth({ db: t.db });
    try {
      expect(await metricValue("forge_jobs.queue.ready", { "forge_jobs.queue": queue })).toBe(2);
      expect(await metricValue("forge_jobs.queue.running", { "forge_jobs.queue": queue })).toBe(0);
    } finally {
      stop();
    }
  });

  it("observes flow control (running and throttled per stored limit) as gauges read from the database", async () => {
    const key = `gauge-${backend.name}:smtp`;
    await setLimit(key, { concurrency: 1 }, { db: t.db });
    // Keyed jobs by SQL until the enqueue option `concurrencyKey` lands: one running, two ready.
    const ids = await enqueueMany([{ task: "k" }, { task: "k" }, { task: "k" }], { db: t.db, queue: `flow-gauged-${backend.name}` });
    for (const id of ids) await t.sql("UPDATE {jobs} SET concurrency_key = $1 WHERE id = $2", [key, id]);
    await t.sql(
      `UPDATE {jobs} SET status = 'running', started_at = ${t.db.sql.now}, locked_until = ${t.db.sql.nowPlus("600")}, claim_token = $1 WHERE id = $2`,
      ["6f1c1a52-8d7e-4d0e-9a53-0f4f8f0c2b11", ids[0]],
    );
    expect(() => observeFlowControl({ db: t.db, interval: 5 } as never)).toThrow(JobError);
    const stop = observeFlowControl({ db: t.db });
    try {
      expect(await metricValue("forge_jobs.limit.running", { "forge_jobs.limit_key": key })).toBe(1);
      expect(await metricValue("forge_jobs.limit.throttled", { "forge_jobs.limit_key": key })).toBe(2);
    } finally {
      stop();
    }
  });

  it("logs through any { debug, info, warn, error } logger: one structured line per failure, quiet otherwise", async () => {
    const lines: { level: string; fields: Record<string, unknown>; msg: string | undefined }[] = [];
    const logger: Logger = Object.fromEntries(
      (["debug", "info", "warn", "error"] as const).map((level) => [
        level,
        (fields: object, msg?: string) => lines.push({ level, fields: fields as Record<string, unknown>, msg }),
      ]),
    ) as unknown as Logger;
    const id = await enqueue("logged", null, { db: t.db, queue: "logs", maxAttempts: 3 });
    await processOne(
      {
        logged: () => {
          throw new Error("smtp down");
        },
      },
      { db: t.db, queue: "logs", logger },
    );
    const failures = lines.filter((l) => l.level === "warn" || l.level === "error");
    expect(failures).toHaveLength(1);
    expect(failures[0]!.fields).toMatchObject({ jobId: id, task: "logged", queue: "logs", attempt: 1, maxAttempts: 3, willRetry: true, retryInSeconds: 10 });
    expect(typeof failures[0]!.fields.durationMs).toBe("number");
    expect(String(failures[0]!.fields.err)).toContain("smtp down");
    expect(failures[0]!.msg).toContain("retrying in 10s");
  });

  it("logs a failed attempt once, on one line: the error's name and message, its stack only in the job's last error (issue 16.14)", async () => {
    const lines: { level: string; text: string }[] = [];
    // What a JSON logger (pino) writes: one serialized object per call.
    const logger: Logger = Object.fromEntries(
      (["debug", "info", "warn", "error"] as const).map((level) => [
        level,
        (fields: object, msg?: string) => lines.push({ level, text: JSON.stringify({ ...fields, msg }) }),
      ]),
    ) as unknown as Logger;
    const ids = [
      await enqueue("twice", null, { db: t.db, queue: "logs-once", maxAttempts: 2 }),
      await enqueue("twice", null, { db: t.db, queue: "logs-once", maxAttempts: 1 }),
    ];
    const fail = () => {
      throw new TypeError("template missing\nsecond line of the message");
    };
    for (let i = 0; i < 2; i++) await processOne({ twice: fail }, { db: t.db, queue: "logs-once", logger });
    const failures = lines.filter((l) => l.level === "warn" || l.level === "error");
    expect(failures).toHaveLength(2);
    expect(failures.map((l) => JSON.parse(l.text).jobId)).toEqual(ids);
    for (const line of failures) {
      const fields = JSON.parse(line.text) as { err: string };
      expect(fields.err).toBe("TypeError: template missing");
      expect(line.text).not.toContain("\\n");
      expect(line.text).not.toMatch(/ at /);
    }
    expect((await getJob(ids[1]!, { db: t.db }))?.lastError).toMatch(/^TypeError: template missing\nsecond line of the message\n\s+at /);
  });
});

describe("library code", () => {
  it("has no console.log (a library prints nothing unless given a logger)", () => {
    const root = fileURLToPath(new URL("../src", import.meta.url));
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (/\.ts$/.test(name) && !path.includes(`${join("src", "cli")}`) && /console\.(log|info|warn|error|debug)\(/.test(readFileSync(path, "utf8")))
          offenders.push(path);
      }
    };
    walk(root);
    expect(offenders).toEqual([]);
  });
});
