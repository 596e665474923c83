// What a handler returns or throws either lands in the table or fails its job with a message
// that says why — never a write refused and retried for good (audit 12, points 2, 4, 12, 16).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, createWorker, enqueue, enqueueMany, getJob, JobError, processOne, type Handlers, type JobsDatabase } from "../src/index.js";
import { backends, deferred, waitFor, type TestDatabase } from "./helpers/backends.js";

const KIB = 1024;
const MIB = 1024 * 1024;

function deep(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { a: value };
  return value;
}

describe.each(backends())("stored results and errors ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** The same queue, connected with other settings (limits). */
  async function withSettings<T>(options: Record<string, number>, fn: (db: JobsDatabase) => Promise<T>): Promise<T> {
    const db = connect(t.url, { schema: t.schema, ...options });
    try {
      return await fn(db);
    } finally {
      await db.close();
    }
  }

  /** Runs a worker on `queue` until every listed job has ended (done or failed). */
  async function runUntilEnded(
    handlers: Handlers,
    queue: string,
    ids: number[],
    options: { db?: JobsDatabase; concurrency?: number; timeoutMs?: number } = {},
  ): Promise<void> {
    const ac = new AbortController();
    const worker = createWorker(handlers, { db: options.db ?? t.db, queue, concurrency: options.concurrency ?? 10, pollInterval: 0.05, signal: ac.signal });
    const running = worker.run();
    try {
      await waitFor(
        `${ids.length} jobs of ${queue} to end`,
        async () => {
          const [row] = await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM {all} WHERE queue = $1 AND status IN ('done', 'failed')`, [queue]);
          return Number(row!.n) === ids.length;
        },
        options.timeoutMs ?? 30_000,
        50,
      );
    } finally {
      ac.abort();
      await running;
    }
  }

  /** Handlers that hold every run until `count` have started, so they all finish in one turn: one completion batch. */
  function together<R>(count: number, result: (payload: never) => R): (payload: never) => Promise<R> {
    const gate = deferred();
    let started = 0;
    return async (payload) => {
      if (++started === count) gate.resolve();
      await gate.promise;
      return result(payload);
    };
  }

  it("40 jobs each returning a 600 KB result all end done (audit 12.2)", async () => {
    // 24 MB of results in one completion batch: more than MariaDB's default max_allowed_packet.
    const ids = await enqueueMany(
      Array.from({ length: 40 }, (_, i) => ({ task: "big", payload: { i } })),
      { db: t.db, queue: "big-results" },
    );
    const big = together(40, (p: { i: number }) => ({ i: p.i, blob: "x".repeat(600 * KIB) }));
    await runUntilEnded({ big }, "big-results", ids, { concurrency: 40 });
    const rows = await t.sql<{ status: string }>("SELECT status FROM {all} WHERE queue = $1", ["big-results"]);
    expect(rows.map((r) => r.status)).toEqual(Array(40).fill("done"));
    const job = await getJob(ids[39]!, { db: t.db });
    expect(job?.result).toEqual({ i: 39, blob: "x".repeat(600 * KIB) });
  });

  it("a result over maxResultBytes fails its job with a message naming the limit (audit 12.2)", async () => {
    await withSettings({ maxResultBytes: 1000 }, async (db) => {
      const small = await enqueue("res", { n: 500 }, { db, queue: "capped" });
      const large = await enqueue("res", { n: 2000 }, { db, queue: "capped" });
      const handlers = { res: (p: { n: number }) => "y".repeat(p.n) };
      expect(await processOne(handlers, { db, queue: "capped" })).toBe(true);
      expect(await processOne(handlers, { db, queue: "capped" })).toBe(true);
      expect((await getJob(small, { db }))?.status).toBe("done");
      const failed = await getJob(large, { db });
      expect(failed?.status).toBe("failed");
      expect(failed?.lastError).toMatch(/result of 2002 bytes is over the 1000-byte limit \(maxResultBytes\)/);
    });
  });

  it("the default result limit is 1 MiB, and the worker fails such a job instead of retrying it (audit 12.2)", async () => {
    const ids = await enqueueMany(
      [
        { task: "res", payload: { n: MIB } },
        { task: "res", payload: { n: MIB - 2 } },
      ],
      { db: t.db, queue: "default-cap" },
    );
    await runUntilEnded({ res: (p: { n: number }) => "z".repeat(p.n) }, "default-cap", ids);
    const [over, under] = await Promise.all(ids.map((id) => getJob(id, { db: t.db })));
    expect(over?.status).toBe("failed");
    expect(over?.lastError).toMatch(/result of 1048578 bytes is over the 1048576-byte limit \(maxResultBytes\)/);
    expect(under?.status).toBe("done");
  });

  it.runIf(backend.name === "mysql")("a result more than max_allowed_packet carries fails its job with a message naming it (audit 12.2)", async () => {
    await withSettings({ maxResultBytes: 64 * MIB }, async (db) => {
      const ids = await enqueueMany(
        [
          { task: "res", payload: { n: 20 * MIB } },
          { task: "res", payload: { n: 10 } },
        ],
        { db, queue: "packet" },
      );
      await runUntilEnded({ res: (p: { n: number }) => "p".repeat(p.n) }, "packet", ids, { db });
      const [over, small] = await Promise.all(ids.map((id) => getJob(id, { db })));
      expect(over?.status).toBe("failed");
      expect(over?.lastError).toMatch(/max_allowed_packet/);
      expect(small?.status).toBe("done");
    });
  });

  it("a completion the database refuses fails that job alone; the rest of its batch lands (audit 12.2)", async () => {
    // An application's own rule on the table stands for any value the database cannot store.
    const undo = await refuseResultsContaining("poison");
    try {
      const ids = await enqueueMany(
        Array.from({ length: 10 }, (_, i) => ({ task: "gate", payload: { i } })),
        { db: t.db, queue: "refused" },
      );
      await runUntilEnded({ gate: together(10, (p: { i: number }) => (p.i === 3 ? "poison" : `fine ${p.i}`)) }, "refused", ids);
      const jobs = await Promise.all(ids.map((id) => getJob(id, { db: t.db })));
      expect(jobs.map((j) => j?.status)).toEqual(ids.map((_, i) => (i === 3 ? "failed" : "done")));
      expect(jobs[3]?.lastError).toMatch(/the database refused to store the result of job \d+/);
      expect(jobs[0]?.result).toBe("fine 0");
    } finally {
      await undo();
    }
  });

  /**
   * A rule of the application's on the jobs' tables, live and ended: no `column` containing
   * `word` (its name and message do not contain the word). An ended job's values are written
   * into history as it moves there; a failure's error is written on the live row first.
   */
  async function refuseResultsContaining(word: string, column = "result"): Promise<() => Promise<void>> {
    const name = `refuse_${column}`;
    if (backend.name === "sqlite") {
      await t.sql(
        `CREATE TRIGGER ${name} BEFORE UPDATE OF ${column} ON {jobs} WHEN NEW.${column} LIKE '%${word}%' BEGIN SELECT RAISE(ABORT, 'refused by rule'); END`,
      );
      await t.sql(
        `CREATE TRIGGER ${name}_ended BEFORE INSERT ON {history} WHEN NEW.${column} LIKE '%${word}%' BEGIN SELECT RAISE(ABORT, 'refused by rule'); END`,
      );
      return async () => {
        await t.sql(`DROP TRIGGER ${name}`);
        await t.sql(`DROP TRIGGER ${name}_ended`);
      };
    }
    const text = backend.name === "postgres" ? `${column}::text` : column;
    for (const table of ["{jobs}", "{history}"])
      await t.sql(`ALTER TABLE ${table} ADD CONSTRAINT ${name} CHECK (${column} IS NULL OR ${text} NOT LIKE '%${word}%')`);
    return async () => {
      for (const table of ["{jobs}", "{history}"]) await t.sql(`ALTER TABLE ${table} DROP CONSTRAINT ${name}`);
    };
  }

  it("a failure the database refuses to store for its message is still recorded, with the database's reason (audit 12.4)", async () => {
    const undo = await refuseResultsContaining("forbidden", "last_error");
    try {
      const id = await enqueue("loud", null, { db: t.db, queue: "refused-error" });
      const ran = await processOne(
        {
          loud: () => {
            throw new Error("a forbidden word");
          },
        },
        { db: t.db, queue: "refused-error" },
      );
      expect(ran).toBe(true);
      const job = await getJob(id, { db: t.db });
      expect(job?.status).toBe("failed");
      expect(job?.lastError).toMatch(/^the database refused to store this job's error: /);
    } finally {
      await undo();
    }
  });

  it("a handler error containing U+0000 or a lone surrogate is recorded (audit 12.4)", async () => {
    const id = await enqueue("nul", null, { db: t.db, queue: "nul-error" });
    const ran = await processOne(
      {
        nul: () => {
          throw new Error("bad\u0000byte and half a pair \ud83d");
        },
      },
      { db: t.db, queue: "nul-error" },
    );
    expect(ran).toBe(true);
    const job = await getJob(id, { db: t.db });
    expect(job?.status).toBe("failed");
    expect(job?.lastError).toContain("Error: bad\uFFFDbyte and half a pair \uFFFD");
  });

  it("a worker records a U+0000 error too, rather than losing it to a reclaim (audit 12.4)", async () => {
    const ids = [await enqueue("nul", null, { db: t.db, queue: "nul-worker" })];
    await runUntilEnded(
      {
        nul: () => {
          throw new Error("a\u0000b");
        },
      },
      "nul-worker",
      ids,
    );
    const job = await getJob(ids[0]!, { db: t.db });
    expect(job?.status).toBe("failed");
    expect(job?.lastError).toContain("Error: a\uFFFDb");
  });

  it("a result containing U+0000 or lone surrogates is stored, those characters as U+FFFD (audit 12.4)", async () => {
    const id = await enqueue("nul", null, { db: t.db, queue: "nul-result" });
    await processOne(
      { nul: () => ({ text: "a\u0000b", half: "x\udc00", pair: "😀", "key\u0000": ["\u0000"], slash: "\\u0000" }) },
      { db: t.db, queue: "nul-result" },
    );
    const job = await getJob(id, { db: t.db });
    expect(job?.status).toBe("done");
    expect(job?.result).toEqual({ text: "a\uFFFDb", half: "x\uFFFD", pair: "😀", "key\uFFFD": ["\uFFFD"], slash: "\\u0000" });
  });

  it("a huge error message is recorded, cut to a documented length (audit 12.4)", async () => {
    const id = await enqueue("loud", null, { db: t.db, queue: "loud" });
    await processOne(
      {
        loud: () => {
          throw new Error("L".repeat(20 * MIB));
        },
      },
      { db: t.db, queue: "loud" },
    );
    const job = await getJob(id, { db: t.db });
    expect(job?.status).toBe("failed");
    expect(job?.lastError?.startsWith("Error: LLLL")).toBe(true);
    expect(job?.lastError?.length).toBeLessThanOrEqual(64 * KIB);
    expect(job?.lastError).toMatch(/… \(\d+ more characters\)$/);
  });

  it("a result nested 2,000 deep or with a throwing getter fails the job with a clear message (audit 12.12)", async () => {
    const [deepId, getterId] = await enqueueMany([{ task: "deep" }, { task: "getter" }], { db: t.db, queue: "bad-results" });
    const handlers = {
      deep: () => deep(2000),
      getter: () => ({
        get broken(): never {
          throw new Error("getter exploded");
        },
      }),
    };
    await processOne(handlers, { db: t.db, queue: "bad-results" });
    await processOne(handlers, { db: t.db, queue: "bad-results" });
    const [deepJob, getterJob] = await Promise.all([getJob(deepId!, { db: t.db }), getJob(getterId!, { db: t.db })]);
    expect(deepJob?.status).toBe("failed");
    expect(deepJob?.lastError).toMatch(/result: nested more than 500 levels deep/);
    expect(getterJob?.status).toBe("failed");
    expect(getterJob?.lastError).toMatch(/result\.broken: reading it threw: getter exploded/);
  });

  it.runIf(backend.name === "mysql")(
    "with a raised maxPayloadBytes, a payload the server cannot take is a JobError naming max_allowed_packet (audit 12.16)",
    async () => {
      await withSettings({ maxPayloadBytes: 64 * MIB }, async (db) => {
        const count = async () => Number((await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all} WHERE queue = $1", ["packet-in"]))[0]!.n);
        const refusals = [
          () => enqueue("t", "x".repeat(20 * MIB), { db, queue: "packet-in" }),
          () => enqueueMany([{ task: "t" }, { task: "t", payload: "x".repeat(20 * MIB) }], { db, queue: "packet-in" }),
          // 9 MiB of JSON, twice that once the driver escapes its quotes and backslashes.
          () => enqueue("t", '"'.repeat(4.5 * MIB), { db, queue: "packet-in" }),
        ];
        for (const refusal of refusals) {
          const error = await refusal().then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error).toBeInstanceOf(JobError);
          expect((error as Error).message).toMatch(/max_allowed_packet/);
        }
        expect(await count()).toBe(0);
        // Under the server's limit, a raised maxPayloadBytes still works.
        const id = await enqueue("t", "w".repeat(5 * MIB), { db, queue: "packet-in" });
        expect(((await getJob(id, { db }))?.payload as string).length).toBe(5 * MIB);
      });
    },
  );
});
