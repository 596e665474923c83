// Point 6 of the reliability issue: hostile input, property-based. Random enqueue calls —
// payloads, options, names with quotes, semicolons, NUL bytes, emoji, lone surrogates, 1 MB
// strings, unknown option keys and values of every type — either create exactly one job that
// reads back exactly as given, or throw JobError having written nothing. Never another error.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, getJob, JobError } from "../../src/index.js";
import { backends, type TestDatabase } from "../helpers/backends.js";
import { jobRows, rejection } from "./helpers/queue.js";
import { scaled, timeoutMs } from "./helpers/scale.js";

const HOSTILE_RUNS = scaled(1000, 10_000);
const VALID_RUNS = scaled(200, 1000);
const BATCH_RUNS = scaled(150, 1000);
/** The default maxPayloadBytes (1 MiB of JSON). */
const LIMIT = 1024 * 1024;
/** FORGE_RELIABILITY_SEED replays a failing run (fast-check prints the seed and path). */
const SEED = process.env.FORGE_RELIABILITY_SEED ? Number(process.env.FORGE_RELIABILITY_SEED) : undefined;
const PATH = process.env.FORGE_RELIABILITY_PATH;

const TRICKY = [
  "'; DROP TABLE jobs; --",
  '"); DELETE FROM jobs; --',
  "' OR '1'='1",
  "\\",
  "\\u0000",
  "$1",
  "?",
  "%s%n",
  "`backtick`",
  "a\u0000b",
  "\u0000",
  "😀",
  "👩‍👩‍👧‍👦",
  "\ud83d", // lone high surrogate
  "x\udc00", // lone low surrogate
  "e\u0301",
  "\u2028\u2029",
  "\uFEFF",
  "null",
  "",
  " ",
  "a".repeat(255),
  "a".repeat(256),
  "😀".repeat(127) + "a", // 255 UTF-16 units
  "😀".repeat(128), // 256
];

/** Text a user might send: random Unicode (lone surrogates included), injection attempts, edge lengths. */
const text = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 30 }) },
  { weight: 3, arbitrary: fc.constantFrom(...TRICKY) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", minLength: 200, maxLength: 300 }) },
);
/** What a typo or a bad cast gives instead of a string. */
const notText = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.array(fc.string(), { maxLength: 2 }),
  fc.object({ maxDepth: 1 }),
  fc.bigInt(),
);
const name = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("send-mail", "export", "'; DROP TABLE jobs; --", "😀") },
  { weight: 4, arbitrary: text },
  { weight: 1, arbitrary: notText },
);

/** Strings around the payload limit, by bytes (not UTF-16 units). Built once, on first use. */
const big = (make: () => string) => fc.constant(null).map(() => make());
const bigStrings = fc.oneof(
  big(() => "x".repeat(LIMIT - 2)), // JSON "xxx…" is exactly the limit: accepted
  big(() => "x".repeat(LIMIT - 1)), // one byte over: refused
  big(() => "é".repeat((LIMIT - 2) / 2)), // 2 bytes each: exactly the limit
  big(() => "😀".repeat(LIMIT / 4)), // 4 bytes each: over
);

const numbers = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(
    0,
    -0,
    1,
    -1,
    0.5,
    NaN,
    Infinity,
    -Infinity,
    2 ** 31 - 1,
    2 ** 31,
    -(2 ** 31),
    -(2 ** 31) - 1,
    1e6,
    1e6 + 1,
    Number.MAX_SAFE_INTEGER,
    1e300,
    5e-324,
    1000 * 365.25 * 86400,
    1000 * 365.25 * 86400 + 1,
  ),
);
/** Any value at all, for an option that expects something specific. */
const anyValue = fc.oneof(numbers, text, notText);

const payload = fc.oneof(
  { weight: 6, arbitrary: fc.jsonValue({ maxDepth: 4, stringUnit: "grapheme" }) },
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4, stringUnit: "binary" }) }, // control characters, NUL included
  {
    weight: 3,
    arbitrary: fc.anything({
      maxDepth: 3,
      withBigInt: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withBoxedValues: true,
      withTypedArray: true,
      withSparseArray: true,
      withObjectString: true,
      stringUnit: "binary",
    }),
  },
  { weight: 2, arbitrary: fc.dictionary(text, fc.oneof(text, numbers), { maxKeys: 4 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<unknown>(
      undefined,
      () => 1,
      Symbol("s"),
      new Date(0),
      new Date(NaN),
      new (class Point {
        x = 1;
      })(),
      new Map(),
      { toJSON: () => "\u0000" },
      { toJSON: () => ({ ok: true }) },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constant(null).map(() => {
      const cycle: Record<string, unknown> = { a: 1 };
      cycle.self = cycle;
      return cycle;
    }),
  },
  { weight: 1, arbitrary: bigStrings },
);

/** Keys from a tiny set collide across calls (idempotency, dedup, tenants); random ones do not. */
const key = fc.oneof({ weight: 6, arbitrary: fc.constantFrom("k1", "k2", "k3", "") }, { weight: 2, arbitrary: text }, { weight: 1, arbitrary: notText });
// An explicit empty or null tenant is refused (scoping fails closed), so it is one case among
// the others rather than most of them.
const tenant = fc.oneof(
  { weight: 20, arbitrary: fc.constantFrom(undefined, "t1", "t2") },
  { weight: 1, arbitrary: fc.constantFrom(null, "") },
  { weight: 1, arbitrary: text },
  { weight: 1, arbitrary: notText },
);

/** Mostly a plausible value, sometimes anything at all. */
const mostly = <T>(plausible: fc.Arbitrary<T>) => fc.oneof({ weight: 8, arbitrary: plausible }, { weight: 1, arbitrary: anyValue });
const knownOptions = fc.record(
  {
    queue: fc.oneof({ weight: 3, arbitrary: fc.constantFrom("q1", "q2") }, { weight: 1, arbitrary: name }),
    maxAttempts: mostly(fc.integer({ min: 1, max: 10 })),
    availableIn: mostly(fc.double({ min: 0, max: 1e6, noNaN: true })),
    priority: mostly(fc.integer({ min: -10, max: 10 })),
    idempotencyKey: key,
    dedupKey: key,
    tenant,
  },
  { requiredKeys: [] },
);
/** Unknown keys (never `db`: the test always passes its own database). */
const unknownOptions = fc.dictionary(
  fc.oneof(fc.constantFrom("constructor", "toString", "__proto__", "Queue", "max_attempts", "delay", "runAt"), text).filter((k) => k !== "db"),
  anyValue,
  { minKeys: 1, maxKeys: 2 },
);
const options = fc.oneof(
  { weight: 20, arbitrary: knownOptions },
  { weight: 1, arbitrary: fc.tuple(knownOptions, unknownOptions).map(([known, unknown]) => ({ ...unknown, ...known })) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, [], "options", 42, true) },
);

/** An enqueueMany item that may be anything (no keys: their model is the single-call property's). */
const hostileItem = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.tuple(name, payload, knownOptions).map(([task, value, opts]) => {
      const { idempotencyKey: _i, dedupKey: _d, ...rest } = opts as Record<string, unknown>;
      return { task, payload: value, ...rest } as unknown;
    }),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, "item", 7, [], { payload: 1 }) },
);

/** Inputs valid by construction: these must always be accepted. */
const safeText = fc.string({ unit: "grapheme", minLength: 1, maxLength: 60 }).filter((s) => !s.includes("\u0000"));
const validCall = fc.record({
  task: fc.oneof(safeText, fc.constantFrom("'; DROP TABLE jobs; --", "😀", "a".repeat(255))),
  payload: fc.oneof(
    fc.jsonValue({ maxDepth: 4, stringUnit: "grapheme" }).filter((v) => !JSON.stringify(v).includes("\\u0000")),
    fc.constant(undefined),
  ),
  options: fc.record(
    {
      queue: safeText,
      maxAttempts: fc.integer({ min: 1, max: 1_000_000 }),
      availableIn: fc.double({ min: 0, max: 1e9, noNaN: true }),
      priority: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
      tenant: fc.constantFrom("t1", "t2"),
    },
    { requiredKeys: [] },
  ),
});

const FIELDS = ["task", "payload", "options", "queue", "maxAttempts", "availableIn", "priority", "idempotencyKey", "dedupKey", "tenant"];

interface Held {
  id: number;
  tenant: string | null;
}

describe.each(backends())("hostile enqueue input ($name)", (backend) => {
  let t: TestDatabase;
  // What the table holds, keyed the way the queue promises: idempotency keys forever, dedup
  // keys while their job is pending (nothing runs in this file, so: forever too).
  const byIdempotencyKey = new Map<string, Held>();
  const byDedupKey = new Map<string, Held>();
  const refusedBy = new Map<string, number>();

  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const optionalKey = (v: unknown) => (v === undefined || v === null || v === "" ? null : (v as string));

  /** The job reads back exactly as it was given: task and queue literally, payload as its JSON round trip. */
  async function expectStored(id: number, task: unknown, payload: unknown, o: Record<string, unknown>): Promise<void> {
    const job = await getJob(id, { db: t.db });
    expect(job).not.toBeNull();
    expect(job).toMatchObject({
      task,
      queue: o.queue ?? "default",
      status: "pending",
      priority: ((o.priority as number | undefined) ?? 0) + 0, // -0 is stored as 0
      attempts: 0,
      maxAttempts: o.maxAttempts ?? 1,
      tenant: optionalKey(o.tenant),
      idempotencyKey: optionalKey(o.idempotencyKey),
      dedupKey: optionalKey(o.dedupKey),
      lastError: null,
      result: null,
      progress: null,
    });
    expect(job!.payload).toEqual(JSON.parse(JSON.stringify(payload) ?? "null") as unknown);
    const delay = (job!.runAt.getTime() - job!.createdAt.getTime()) / 1000;
    expect(Math.abs(delay - ((o.availableIn as number | undefined) ?? 0))).toBeLessThan(1);
  }

  /** One call: a new job that reads back as given, the job its key already names, or a JobError and no write. */
  async function check(task: unknown, payload: unknown, rawOptions: unknown): Promise<"created" | "existing" | "refused"> {
    const given = typeof rawOptions === "object" && rawOptions !== null && !Array.isArray(rawOptions) ? (rawOptions as Record<string, unknown>) : null;
    const callOptions = given ? { ...given, db: t.db } : rawOptions;
    const before = await jobRows(t);
    let id: number;
    try {
      id = await enqueue(task as string, payload as never, callOptions as never);
    } catch (error) {
      if (!(error instanceof JobError))
        throw new Error(`enqueue threw ${(error as Error)?.name ?? typeof error}, not a JobError: ${String((error as Error)?.message ?? error)}`);
      expect(error.message.length).toBeGreaterThan(10); // says what to fix
      expect(await jobRows(t)).toBe(before);
      const field = (error.field ?? "?").split(/[.[]/)[0]!;
      const bucket = FIELDS.includes(field) ? field : "unknown option";
      refusedBy.set(bucket, (refusedBy.get(bucket) ?? 0) + 1);
      return "refused";
    }
    const after = await jobRows(t);
    const o = given!;
    const ik = optionalKey(o.idempotencyKey);
    const dk = optionalKey(o.dedupKey);
    const tn = optionalKey(o.tenant);
    // A key that already names a job: that job's id comes back, nothing is written, and never
    // another tenant's job (the idempotency key decides first; a held dedup key may answer too).
    const holders = [ik !== null ? byIdempotencyKey.get(ik) : undefined, dk !== null ? byDedupKey.get(dk) : undefined].filter(
      (h): h is Held => h !== undefined,
    );
    if (after === before) {
      expect(holders.map((h) => ({ id: h.id, tenant: h.tenant }))).toContainEqual({ id, tenant: tn });
      return "existing";
    }
    expect(holders).toEqual([]); // a new job although its key was taken: a duplicate
    expect(after).toBe(before + 1);
    await expectStored(id, task, payload, o);
    if (ik !== null) byIdempotencyKey.set(ik, { id, tenant: tn });
    if (dk !== null) byDedupKey.set(dk, { id, tenant: tn });
    return "created";
  }

  it(
    `${HOSTILE_RUNS} random enqueue calls: one faithful job or a JobError with nothing written, never another error`,
    async () => {
      const outcomes = { created: 0, existing: 0, refused: 0 };
      await fc.assert(
        fc.asyncProperty(name, payload, options, async (task, value, opts) => {
          outcomes[await check(task, value, opts)]++;
        }),
        { numRuns: HOSTILE_RUNS, seed: SEED, path: PATH },
      );
      // The generators reach every outcome, so the property is not passing vacuously.
      expect(outcomes.created).toBeGreaterThan(HOSTILE_RUNS / 20);
      expect(outcomes.refused).toBeGreaterThan(HOSTILE_RUNS / 20);
      expect(outcomes.existing).toBeGreaterThan(0);
      console.info(`[reliability] ${backend.name}: hostile enqueue ${JSON.stringify(outcomes)}, refused by ${JSON.stringify(Object.fromEntries(refusedBy))}`);
    },
    timeoutMs(150, 1200),
  );

  it(
    `${BATCH_RUNS} enqueueMany batches with at most one hostile item: all written, or a JobError and none, exactly when that item alone is refused`,
    async () => {
      const outcomes = { created: 0, refused: 0 };
      await fc.assert(
        fc.asyncProperty(fc.array(validCall, { maxLength: 4 }), fc.option(hostileItem, { nil: undefined }), fc.nat(), async (valid, hostile, at) => {
          const items: unknown[] = valid.map((v) => ({ task: v.task, payload: v.payload, ...v.options }));
          if (hostile !== undefined) items.splice(at % (items.length + 1), 0, hostile);
          const before = await jobRows(t);
          let ids: number[];
          try {
            ids = await enqueueMany(items as never, { db: t.db });
          } catch (error) {
            if (!(error instanceof JobError))
              throw new Error(`enqueueMany threw ${(error as Error)?.name}, not a JobError: ${String((error as Error)?.message ?? error)}`);
            expect(await jobRows(t)).toBe(before); // all or nothing
            // The valid items cannot be the reason: the hostile one alone is refused as well.
            expect(hostile).toBeDefined();
            if (typeof hostile === "object" && hostile !== null && !Array.isArray(hostile)) {
              const { task, payload: value, ...opts } = hostile as Record<string, unknown>;
              await rejection(() => enqueue(task as string, value as never, { ...opts, db: t.db } as never));
            }
            outcomes.refused++;
            return;
          }
          expect(ids.length).toBe(items.length);
          expect(new Set(ids).size).toBe(ids.length);
          expect(await jobRows(t)).toBe(before + items.length);
          for (const [i, id] of ids.entries()) {
            const { task, payload: value, ...opts } = items[i] as Record<string, unknown>;
            await expectStored(id, task, value, opts);
          }
          outcomes.created++;
        }),
        { numRuns: BATCH_RUNS, seed: SEED, path: PATH },
      );
      expect(outcomes.created).toBeGreaterThan(0);
      expect(outcomes.refused).toBeGreaterThan(0);
    },
    timeoutMs(60, 300),
  );

  it(
    `${VALID_RUNS} valid enqueue calls (quotes, emoji, extreme numbers) are all accepted and read back exactly`,
    async () => {
      await fc.assert(
        fc.asyncProperty(validCall, async ({ task, payload: value, options: opts }) => {
          expect(await check(task, value, opts)).toBe("created");
        }),
        { numRuns: VALID_RUNS, seed: SEED, path: PATH },
      );
    },
    timeoutMs(60, 300),
  );
});
