import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cancelJob,
  connect,
  drain,
  enqueue,
  enqueueMany,
  getJob,
  heartbeat,
  JobError,
  migrate,
  observeQueueDepth,
  pendingCount,
  processOne,
  prune,
  reclaim,
  retryJob,
  runWorker,
  schemaVersion,
  statusCounts,
} from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("bad input is refused with JobError and writes nothing ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  async function rows(): Promise<number> {
    const [row] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all}");
    return Number(row!.n);
  }

  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;

  // (audit 12.12) deep nesting used to overflow the stack, a getter's throw used to escape raw.
  const deep = (levels: number): unknown => {
    let value: unknown = 1;
    for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { a: value };
    return value;
  };
  const throwingGetter = {
    ok: 1,
    get broken(): never {
      throw new Error("getter exploded");
    },
  };

  const cases: [string, () => Promise<unknown>, RegExp][] = [
    ["payload nested 2,000 deep (audit 12.12)", () => enqueue("t", deep(2000), { db: t.db }), /^payload: nested more than 500 levels deep/],
    ["payload nested 100,000 deep (audit 12.12)", () => enqueue("t", deep(100_000), { db: t.db }), /nested more than 500 levels deep/],
    [
      "payload with a throwing getter (audit 12.12)",
      () => enqueue("t", { x: throwingGetter }, { db: t.db }),
      /payload\.x\.broken: reading it threw: getter exploded/,
    ],
    [
      "payload whose toJSON throws (audit 12.12)",
      () =>
        enqueue(
          "t",
          {
            x: {
              toJSON: () => {
                throw new Error("no JSON today");
              },
            },
          },
          { db: t.db },
        ),
      /payload\.x: toJSON\(\) threw: no JSON today/,
    ],
    [
      "deep item in enqueueMany (audit 12.12)",
      () => enqueueMany([{ task: "ok" }, { task: "ok", payload: deep(2000) }], { db: t.db }),
      /^items\[1\]\.payload: nested more than 500 levels deep/,
    ],
    [
      "throwing getter in enqueueMany (audit 12.12)",
      () => enqueueMany([{ task: "ok", payload: throwingGetter }], { db: t.db }),
      /items\[0\]\.payload\.broken: reading it threw/,
    ],
    ["unknown option", () => enqueue("t", null, { db: t.db, prority: 1 } as never), /unknown option "prority"; allowed: queue, maxAttempts/],
    ["function payload", () => enqueue("t", { f: () => 1 } as never, { db: t.db }), /payload\.f: a function is not JSON/],
    ["BigInt payload", () => enqueue("t", { n: 10n } as never, { db: t.db }), /payload\.n: BigInt is not JSON/],
    ["cyclic payload", () => enqueue("t", cyclic, { db: t.db }), /payload\.self: circular reference/],
    ["NaN in payload", () => enqueue("t", { x: NaN }, { db: t.db }), /payload\.x: NaN is not a JSON number/],
    ["class instance payload", () => enqueue("t", new Map() as never, { db: t.db }), /a Map instance is not plain JSON/],
    ["NaN priority", () => enqueue("t", null, { db: t.db, priority: NaN }), /priority must be an integer .* got NaN/],
    ["fractional priority", () => enqueue("t", null, { db: t.db, priority: 1.5 }), /priority must be an integer .* got 1\.5/],
    ["negative delay", () => enqueue("t", null, { db: t.db, availableIn: -1 }), /availableIn must be a number of seconds ≥ 0, got -1/],
    ["infinite delay", () => enqueue("t", null, { db: t.db, availableIn: Infinity }), /availableIn must be a number of seconds/],
    ["maxAttempts 0", () => enqueue("t", null, { db: t.db, maxAttempts: 0 }), /maxAttempts must be an integer from 1/],
    ["oversize payload", () => enqueue("t", { s: "x".repeat(1024 * 1024 + 1) }, { db: t.db }), /payload is \d+ bytes of JSON; the limit is 1048576/],
    ["empty task", () => enqueue("", null, { db: t.db }), /task must be a non-empty string, got ""/],
    ["non-string task", () => enqueue(42 as unknown as string, null, { db: t.db }), /task must be a non-empty string, got 42/],
    ["empty queue", () => enqueue("t", null, { db: t.db, queue: "" }), /queue must be a non-empty string/],
    ["NUL in a name", () => enqueue("t\u0000x", null, { db: t.db }), /task cannot contain NUL/],
    ["NUL in payload", () => enqueue("t", { s: "a\u0000b" }, { db: t.db }), /payload\.s: strings cannot contain NUL/],
    ["lone surrogate", () => enqueue("t", { s: "\ud800" }, { db: t.db }), /lone surrogate/],
    ["too long a task name", () => enqueue("t".repeat(256), null, { db: t.db }), /task must be at most 255 characters/],
    ["non-string key", () => enqueue("t", null, { db: t.db, idempotencyKey: 5 as never }), /idempotencyKey must be a string/],
    ["options not an object", () => enqueue("t", null, "fast" as never), /options must be an object/],
    [
      "one bad item in enqueueMany",
      () => enqueueMany([{ task: "ok" }, { task: "ok", priority: 0.5 }], { db: t.db }),
      /items\[1\]\.priority must be an integer/,
    ],
    ["unknown item option", () => enqueueMany([{ task: "ok", db: t.db } as never], { db: t.db }), /items\[0\]: unknown option "db"/],
  ];

  it.each(cases)("%s", async (_name, call, message) => {
    const before = await rows();
    const error = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(JobError);
    expect((error as Error).message).toMatch(message);
    expect(await rows()).toBe(before);
  });

  it("names that look like SQL, quotes and emoji are stored literally", async () => {
    const task = `x'); DROP TABLE jobs; -- "😀"`;
    const id = await enqueue(task, { q: 'it\'s "quoted"; DELETE' }, { db: t.db, queue: "q'; --" });
    const [row] = await t.sql<{ task: string; queue: string }>("SELECT task, queue FROM {all} WHERE id = $1", [id]);
    expect(row).toEqual({ task, queue: "q'; --" });
  });
});

const TOKEN = "00000000-0000-4000-8000-000000000000";

describe.each(backends())("every entry point refuses unknown options and a lease under the minimum, changing nothing ($name)", (backend) => {
  let t: TestDatabase;
  let pending: number;
  beforeAll(async () => {
    t = await backend.create();
    pending = await enqueue("t", null, { db: t.db });
    // A finished job a prune that ran would delete (olderThan: 0 below).
    await cancelJob(await enqueue("t", null, { db: t.db }), { db: t.db });
  });
  afterAll(() => t.close());

  async function snapshot(): Promise<unknown[]> {
    return t.sql("SELECT id, status, attempts, locked_until FROM {all} ORDER BY id");
  }

  const cases: [string, () => Promise<unknown>, RegExp][] = [
    [
      "cancelJob, unknown option",
      () => cancelJob(pending, { db: t.db, tenantID: "a" } as never),
      /^cancelJob: unknown option "tenantID"; allowed: db, tenant$/,
    ],
    ["retryJob, unknown option", () => retryJob(pending, { db: t.db, force: true } as never), /^retryJob: unknown option "force"/],
    ["cancelJob, options not an object", () => cancelJob(pending, "now" as never), /^cancelJob: options must be an object, got string/],
    [
      "prune, unknown option",
      () => prune({ db: t.db, olderThan: 0, status: ["done"] } as never),
      /^prune: unknown option "status"; allowed: olderThan, statuses, batchSize, into, db$/,
    ],
    ["prune, options not an object", () => prune(null as never), /^prune: options must be an object, got null/],
    [
      "prune, empty statuses",
      () => prune({ db: t.db, olderThan: 0, statuses: [] }),
      /^prune: statuses must be a non-empty list of "done", "failed", "cancelled", got \[\]/,
    ],
    [
      "prune, a status that never ends",
      () => prune({ db: t.db, olderThan: 0, statuses: ["running"] as never }),
      /statuses must be a non-empty list .* got \["running"\]/,
    ],
    [
      "prune, statuses not a list",
      () => prune({ db: t.db, olderThan: 0, statuses: "cancelled" as never }),
      /statuses must be a non-empty list .* got "cancelled"/,
    ],
    ["migrate, unknown option", () => migrate({ db: t.db, schema: "x" } as never), /^migrate: unknown option "schema"; allowed: db$/],
    ["schemaVersion, unknown option", () => schemaVersion({ db: t.db, dryRun: true } as never), /^schemaVersion: unknown option "dryRun"/],
    [
      "heartbeat, unknown option",
      () => heartbeat(TOKEN, { db: t.db, leaseSeconds: 60 } as never),
      /^heartbeat: unknown option "leaseSeconds"; allowed: lease, db$/,
    ],
    ["heartbeat, options not an object", () => heartbeat(TOKEN, 60 as never), /^heartbeat: options must be an object, got number/],
    ["heartbeat, lease 0", () => heartbeat(TOKEN, { db: t.db, lease: 0 }), /^lease must be a number of seconds ≥ 0\.001, got 0$/],
    ["heartbeat, negative lease", () => heartbeat(TOKEN, { db: t.db, lease: -5 }), /^lease must be a number of seconds ≥ 0\.001/],
    ["processOne, lease 0", () => processOne({}, { db: t.db, lease: 0 }), /^lease must be a number of seconds ≥ 0\.001, got 0$/],
    ["drain, lease 0", () => drain({}, { db: t.db, lease: 0 }), /^lease must be a number of seconds ≥ 0\.001, got 0$/],
    ["runWorker, lease 0", () => runWorker({}, { db: t.db, lease: 0 }), /^lease must be a number of seconds ≥ 0\.001, got 0$/],
    ["reclaim, unknown option", () => reclaim({ db: t.db, silentFor: 0 } as never), /^reclaim: unknown option "silentFor"; allowed: lease, queue, db$/],
    ["reclaim, negative silence", () => reclaim({ db: t.db, lease: -1 }), /^lease must be a number of seconds ≥ 0, got -1/],
    ["getJob, unknown option", () => getJob(pending, { db: t.db, tenantId: "a" } as never), /^getJob: unknown option "tenantId"/],
    ["pendingCount, unknown option", () => pendingCount({ db: t.db, queues: ["a"] } as never), /^pendingCount: unknown option "queues"/],
    ["statusCounts, unknown option", () => statusCounts({ db: t.db, tenants: [] } as never), /^statusCounts: unknown option "tenants"/],
    [
      "enqueueMany, unknown option",
      () => enqueueMany([{ task: "t" }], { db: t.db, priority: 1 } as never),
      /^enqueueMany: unknown option "priority"; allowed: queue, db$/,
    ],
    [
      "observeQueueDepth, unknown option",
      async () => observeQueueDepth({ db: t.db, interval: 5 } as never),
      /^observeQueueDepth: unknown option "interval"; allowed: db$/,
    ],
    [
      "connect, unknown option",
      async () => connect(t.url, { schemaName: "x" } as never),
      /^connect: unknown option "schemaName"; allowed: schema, maxPayloadBytes, maxResultBytes, payloadCodec, poolSize, pooler, listenUrl, readUrl, jobDefaults$/,
    ],
  ];

  it.each(cases)("%s", async (_name, call, message) => {
    const before = await snapshot();
    const error = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(JobError);
    expect((error as Error).message).toMatch(message);
    expect(await snapshot()).toEqual(before);
  });

  it("heartbeat refuses lease 0 for a job it holds, and an omitted lease keeps the lease the job holds", async () => {
    await enqueue("beat", null, { db: t.db, queue: "beat" });
    let refused: unknown;
    let kept: boolean | undefined;
    const ran = await processOne(
      {
        beat: async (_p: unknown, ctx) => {
          refused = await heartbeat(ctx.claimToken, { db: t.db, lease: 0 }).catch((e: unknown) => e);
          kept = await heartbeat(ctx.claimToken, { db: t.db });
        },
      },
      { db: t.db, queue: "beat", lease: 60 },
    );
    expect(ran).toBe(true);
    expect(refused).toBeInstanceOf(JobError);
    expect((refused as Error).message).toMatch(/lease must be a number of seconds ≥ 0\.001, got 0/);
    expect(kept).toBe(true);
  });

  it("prune with valid statuses still deletes what it names", async () => {
    const id = await enqueue("t", null, { db: t.db, queue: "prune" });
    await cancelJob(id, { db: t.db });
    expect(await prune({ db: t.db, olderThan: 0, statuses: ["cancelled", "cancelled"] })).toBeGreaterThanOrEqual(1);
    expect(await getJob(id, { db: t.db })).toBeNull();
  });
});
