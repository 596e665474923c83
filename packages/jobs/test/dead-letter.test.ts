// Dead letters (`deadLetter: "queue"` per job, or per queue in jobDefaults): a job that fails for
// good — its last attempt failed, its error said `retryable: false`, or its worker was lost with
// no attempt left — gets a DEAD_LETTER_TASK job in that queue, written in the failure's own
// transaction; the original stays failed. Retrying a letter from the dashboard's selection sends
// its job back to its queue.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  aesGcmCodec,
  connect,
  DEAD_LETTER_TASK,
  enqueue,
  enqueueMany,
  getJob,
  JobError,
  processOne,
  reclaim,
  retryJob,
  type DeadLetterPayload,
} from "../src/index.js";
import { actOnSelection } from "../src/dashboard/selection.js";
import { backends, uniqueName, type TestDatabase } from "./helpers/backends.js";

const permanent = (message: string) => Object.assign(new Error(message), { retryable: false });

describe.each(backends())("dead letters ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** The ids of the letters in `queue`, oldest first (live or ended). */
  const letters = async (queue: string) =>
    (await t.sql<{ id: number | string }>("SELECT id FROM {all} WHERE queue = $1 AND task = $2 ORDER BY id", [queue, DEAD_LETTER_TASK])).map((r) =>
      Number(r.id),
    );
  const job = async (id: number) => (await getJob(id, { db: t.db }))!;

  it("a job whose last attempt fails gets a letter in its dead-letter queue, with its id, payload, error and attempts; it stays failed", async () => {
    const queue = uniqueName("dl");
    const dlq = `${queue}-dead`;
    const id = await enqueue("charge", { order: 7 }, { db: t.db, queue, tenant: "org1", deadLetter: dlq });
    expect(await processOne({ charge: () => Promise.reject(new Error("card declined")) }, { db: t.db, queue })).toBe(true);
    expect((await job(id)).status).toBe("failed");
    const [letterId, ...more] = await letters(dlq);
    expect(more).toEqual([]);
    const letter = await job(letterId!);
    expect(letter).toMatchObject({ queue: dlq, task: DEAD_LETTER_TASK, status: "pending", tenant: "org1" });
    expect(letter.lastError).toMatch(/card declined/);
    const payload = letter.payload as DeadLetterPayload;
    expect(payload).toMatchObject({ id, queue, task: "charge", payload: { order: 7 }, tenant: "org1", attempts: 1, maxAttempts: 1 });
    expect(payload.error).toMatch(/card declined/);
  });

  it("a failure with attempts left sends none; a non-retryable error sends one at once", async () => {
    const queue = uniqueName("dl-retry");
    const dlq = `${queue}-dead`;
    const id = await enqueue("charge", null, { db: t.db, queue, maxAttempts: 5, deadLetter: dlq });
    expect(await processOne({ charge: () => Promise.reject(new Error("timeout")) }, { db: t.db, queue })).toBe(true);
    expect((await job(id)).status).toBe("pending");
    expect(await letters(dlq)).toEqual([]);
    const other = await enqueue("charge", null, { db: t.db, queue, maxAttempts: 5, deadLetter: dlq });
    expect(await processOne({ charge: () => Promise.reject(permanent("no such card")) }, { db: t.db, queue })).toBe(true);
    expect((await job(other)).status).toBe("failed");
    const [letterId] = await letters(dlq);
    expect((await job(letterId!)).payload).toMatchObject({ id: other, attempts: 1, maxAttempts: 5 });
  });

  it("a job whose worker was lost with no attempt left gets a letter too", async () => {
    const queue = uniqueName("dl-lost");
    const dlq = `${queue}-dead`;
    const id = await enqueue("slow", { n: 1 }, { db: t.db, queue, deadLetter: dlq });
    // While the handler runs, the sweep takes the job back: no attempt left, so failed (worker lost).
    await processOne({ slow: () => reclaim({ lease: 0, queue, db: t.db }) }, { db: t.db, queue });
    expect((await job(id)).status).toBe("failed");
    const [letterId] = await letters(dlq);
    expect(letterId).toBeDefined();
    expect((await job(letterId!)).payload).toMatchObject({ id, payload: { n: 1 }, attempts: 1 });
    expect((await job(letterId!)).lastError).toMatch(/worker/);
  });

  it("the letter is written in the failure's transaction: when it cannot be written, the job is not failed either", async () => {
    const queue = uniqueName("dl-atomic");
    const dlq = `${queue}-dead`;
    const trigger = uniqueName("no_letters");
    const create = {
      postgres: [
        `CREATE FUNCTION ${t.tableName(trigger)}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no letters'; END $$`,
        `CREATE TRIGGER ${trigger} BEFORE INSERT ON {jobs} FOR EACH ROW WHEN (NEW.queue = '${dlq}') EXECUTE FUNCTION ${t.tableName(trigger)}()`,
      ],
      sqlite: [`CREATE TRIGGER ${trigger} BEFORE INSERT ON jobs WHEN NEW.queue = '${dlq}' BEGIN SELECT RAISE(ABORT, 'no letters'); END`],
      mysql: [
        `CREATE TRIGGER ${t.tableName(trigger)} BEFORE INSERT ON {jobs} FOR EACH ROW BEGIN IF NEW.queue = '${dlq}' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no letters'; END IF; END`,
      ],
    }[backend.name];
    for (const sql of create) await t.sql(sql);
    const id = await enqueue("charge", null, { db: t.db, queue, deadLetter: dlq });
    try {
      await processOne({ charge: () => Promise.reject(permanent("declined")) }, { db: t.db, queue }).catch(() => undefined);
      expect((await job(id)).status).toBe("running");
      expect(await letters(dlq)).toEqual([]);
    } finally {
      await t.sql(
        backend.name === "postgres" ? `DROP TRIGGER ${trigger} ON {jobs}` : `DROP TRIGGER ${backend.name === "mysql" ? t.tableName(trigger) : trigger}`,
      );
    }
    // Its worker gone, the sweep fails it for good, and the letter goes with it.
    await reclaim({ lease: 0, queue, db: t.db });
    expect((await job(id)).status).toBe("failed");
    expect(await letters(dlq)).toHaveLength(1);
  });

  it("per queue through jobDefaults: every job of the queue unless it says deadLetter: null; enqueueMany items too", async () => {
    const queue = uniqueName("dl-q");
    const dlq = `${queue}-dead`;
    const db = connect(t.url, { ...(t.schema ? { schema: t.schema } : {}), jobDefaults: { queues: { [queue]: { deadLetter: dlq } } } });
    try {
      const routed = await enqueue("x", { n: 1 }, { db, queue });
      const opted = await enqueue("x", { n: 2 }, { db, queue, deadLetter: null });
      const [many] = await enqueueMany([{ task: "x", payload: { n: 3 } }], { db, queue });
      for (let i = 0; i < 3; i++) await processOne({ x: () => Promise.reject(new Error("down")) }, { db: t.db, queue });
      const sent = await Promise.all((await letters(dlq)).map(async (l) => ((await job(l)).payload as DeadLetterPayload).id));
      expect(sent.sort()).toEqual([routed, many].sort());
      expect((await job(opted)).status).toBe("failed");
    } finally {
      await db.close();
    }
  });

  it("a letter that fails stays failed: it has no dead-letter queue of its own", async () => {
    const queue = uniqueName("dl-twice");
    const dlq = `${queue}-dead`;
    const db = connect(t.url, { ...(t.schema ? { schema: t.schema } : {}), jobDefaults: { queues: { [dlq]: { deadLetter: queue } } } });
    try {
      await enqueue("x", null, { db, queue, deadLetter: dlq });
      await processOne({ x: () => Promise.reject(new Error("down")) }, { db: t.db, queue });
      const [letterId] = await letters(dlq);
      await processOne({ [DEAD_LETTER_TASK]: () => Promise.reject(new Error("alerting down")) }, { db: t.db, queue: dlq });
      expect((await job(letterId!)).status).toBe("failed");
      expect(await letters(queue)).toEqual([]);
    } finally {
      await db.close();
    }
  });

  it("retrying a letter from the dashboard's selection sends its job back to its queue and cancels the letter", async () => {
    const queue = uniqueName("dl-redrive");
    const dlq = `${queue}-dead`;
    const id = await enqueue("charge", { order: 9 }, { db: t.db, queue, maxAttempts: 2, tenant: "org1", deadLetter: dlq });
    await processOne({ charge: () => Promise.reject(permanent("declined")) }, { db: t.db, queue });
    const [letterId] = await letters(dlq);
    const other = await enqueue("charge", null, { db: t.db, queue: `${queue}-b`, deadLetter: dlq });
    await processOne({ charge: () => Promise.reject(permanent("declined")) }, { db: t.db, queue: `${queue}-b` });
    const outcome = await actOnSelection(t.db, "retry", [letterId!, other], null);
    // The second id is a failed job, not a letter: retried itself.
    expect(outcome).toMatchObject({ done: 2, of: 2, refused: [] });
    expect((await job(letterId!)).status).toBe("cancelled");
    expect((await job(id)).status).toBe("failed");
    const [again] = await t.sql<{ id: number | string; dead_letter: string }>("SELECT id, dead_letter FROM {jobs} WHERE queue = $1 AND status = 'pending'", [
      queue,
    ]);
    expect(again!.dead_letter).toBe(dlq);
    expect(await job(Number(again!.id))).toMatchObject({ task: "charge", payload: { order: 9 }, tenant: "org1", maxAttempts: 2, attempts: 0 });
    expect((await job(other)).status).toBe("pending");
    // The original, retried itself, keeps its route (dead_letter is kept in history).
    expect(await retryJob(id, { db: t.db })).toBe(true);
    expect((await t.sql<{ dead_letter: string }>("SELECT dead_letter FROM {jobs} WHERE id = $1", [id]))[0]!.dead_letter).toBe(dlq);
    // A letter already sent back is refused, not retried as a cancelled job.
    expect(await actOnSelection(t.db, "retry", [letterId!], null)).toMatchObject({ done: 0, refused: [letterId] });
    // Another tenant's dashboard does not see the letter.
    const [second] = await letters(dlq).then(async () => {
      await enqueue("charge", null, { db: t.db, queue, tenant: "org1", deadLetter: dlq });
      await processOne({ charge: () => Promise.reject(permanent("declined")) }, { db: t.db, queue });
      return (await letters(dlq)).slice(-1);
    });
    expect(await actOnSelection(t.db, "retry", [second!], "org2")).toMatchObject({ done: 0, refused: [second] });
  });

  it("with a payloadCodec: the letter carries the payload and error as the handler saw them, sealed at rest, and a redrive gets the payload back", async () => {
    const queue = uniqueName("dl-codec");
    const dlq = `${queue}-dead`;
    const db = connect(t.url, { ...(t.schema ? { schema: t.schema } : {}), payloadCodec: aesGcmCodec({ keys: { a: randomBytes(32) }, current: "a" }) });
    try {
      const id = await enqueue("charge", { card: "4111-1111-1111-1111" }, { db, queue, deadLetter: dlq });
      await processOne({ charge: () => Promise.reject(permanent("card 4111-1111-1111-1111 declined")) }, { db, queue });
      const [letterId] = await letters(dlq);
      const letter = (await getJob(letterId!, { db }))!;
      expect(letter.payload).toMatchObject({ id, payload: { card: "4111-1111-1111-1111" }, error: expect.stringMatching(/card 4111-1111-1111-1111 declined/) });
      expect(letter.lastError).toMatch(/declined/);
      const [raw] = await t.sql<{ payload: unknown; last_error: string }>("SELECT payload, last_error FROM {jobs} WHERE id = $1", [letterId]);
      expect(JSON.stringify(raw)).not.toContain("4111");
      expect(await actOnSelection(db, "retry", [letterId!], null)).toMatchObject({ done: 1 });
      const [again] = await t.sql<{ id: number | string }>("SELECT id FROM {jobs} WHERE queue = $1 AND status = 'pending'", [queue]);
      expect((await getJob(Number(again!.id), { db }))!.payload).toEqual({ card: "4111-1111-1111-1111" });
    } finally {
      await db.close();
    }
  });

  it("refused: its own queue, not a name, and a queue default naming itself — a JobError, nothing written", async () => {
    const queue = uniqueName("dl-bad");
    await expect(enqueue("x", null, { db: t.db, queue, deadLetter: queue })).rejects.toThrow(/deadLetter must name another queue than the job's own/);
    await expect(enqueue("x", null, { db: t.db, queue, deadLetter: 42 as never })).rejects.toThrow(JobError);
    await expect(enqueue("x", null, { db: t.db, queue, deadLetter: "" })).rejects.toThrow(/deadLetter must be a non-empty string/);
    expect(() => connect(t.url, { ...(t.schema ? { schema: t.schema } : {}), jobDefaults: { queues: { q: { deadLetter: "q" } } } })).toThrow(
      /jobDefaults\.queues\["q"\]\.deadLetter must name another queue/,
    );
    expect(Number((await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all} WHERE queue = $1", [queue]))[0]!.n)).toBe(0);
  });
});
