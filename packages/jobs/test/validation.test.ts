import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, JobError } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("bad input is refused with JobError and writes nothing ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  async function rows(): Promise<number> {
    const [row] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {jobs}");
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
    ["payload with a throwing getter (audit 12.12)", () => enqueue("t", { x: throwingGetter }, { db: t.db }), /payload\.x\.broken: reading it threw: getter exploded/],
    ["payload whose toJSON throws (audit 12.12)", () => enqueue("t", { x: { toJSON: () => { throw new Error("no JSON today"); } } }, { db: t.db }), /payload\.x: toJSON\(\) threw: no JSON today/],
    ["deep item in enqueueMany (audit 12.12)", () => enqueueMany([{ task: "ok" }, { task: "ok", payload: deep(2000) }], { db: t.db }), /^items\[1\]\.payload: nested more than 500 levels deep/],
    ["throwing getter in enqueueMany (audit 12.12)", () => enqueueMany([{ task: "ok", payload: throwingGetter }], { db: t.db }), /items\[0\]\.payload\.broken: reading it threw/],
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
    ["one bad item in enqueueMany", () => enqueueMany([{ task: "ok" }, { task: "ok", priority: 0.5 }], { db: t.db }), /items\[1\]\.priority must be an integer/],
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
    const id = await enqueue(task, { q: "it's \"quoted\"; DELETE" }, { db: t.db, queue: "q'; --" });
    const [row] = await t.sql<{ task: string; queue: string }>("SELECT task, queue FROM {jobs} WHERE id = $1", [id]);
    expect(row).toEqual({ task, queue: "q'; --" });
  });
});
