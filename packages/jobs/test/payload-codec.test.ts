// Encrypted payloads (issue 36.9): `connect(url, { payloadCodec: aesGcmCodec(...) })` stores
// payloads, results and error messages as AES-256-GCM ciphertext naming its key id; the worker
// and the reads get the plaintext back; old keys keep opening old rows after a rotation.
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { aesGcmCodec, connect, enqueue, getJob, JobError, processOne, type JobsDatabase } from "../src/index.js";
import { createDashboard } from "../src/dashboard/index.js";
import { readSearch } from "../src/dashboard/search.js";
import { backends, uniqueName, type TestDatabase } from "./helpers/backends.js";

const K1 = randomBytes(32);
const K2 = randomBytes(32);
const SECRET = "4111-1111-1111-1111";

/** A stored value as text, whatever the driver made of the JSON column. */
const stored = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(value));

describe.each(backends())("payloadCodec ($name)", (backend) => {
  let t: TestDatabase;
  const opened: JobsDatabase[] = [];
  const withCodec = (keys: Record<string, Buffer>, current: string): JobsDatabase => {
    const db = connect(t.url, { ...(t.schema ? { schema: t.schema } : {}), payloadCodec: aesGcmCodec({ keys, current }) });
    opened.push(db);
    return db;
  };
  let v1: JobsDatabase;
  let v2: JobsDatabase;
  beforeAll(async () => {
    t = await backend.create();
    v1 = withCodec({ k1: K1 }, "k1");
    v2 = withCodec({ k2: K2, k1: K1 }, "k2");
  });
  afterAll(async () => {
    for (const db of opened) await db.close();
    await t.close();
  });

  const raw = async (id: number) =>
    (await t.sql<{ payload: unknown; result: unknown; last_error: string | null }>("SELECT payload, result, last_error FROM {all} WHERE id = $1", [id]))[0]!;

  it("the payload and the result are ciphertext in the table; the handler and getJob see the plaintext", async () => {
    const queue = uniqueName("sealed");
    const id = await enqueue("charge", { card: SECRET, amount: 12 }, { db: v1, queue });
    const before = await raw(id);
    expect(stored(before.payload)).not.toContain(SECRET);
    expect(stored(before.payload)).toMatch(/^"?\$sealed:k1\./);
    const seen: unknown[] = [];
    expect(await processOne({ charge: (payload) => (seen.push(payload), { receipt: `paid with ${SECRET}` }) }, { db: v1, queue })).toBe(true);
    expect(seen).toEqual([{ card: SECRET, amount: 12 }]);
    const after = await raw(id);
    expect(stored(after.result)).not.toContain(SECRET);
    expect(stored(after.result)).toMatch(/^"?\$sealed:k1\./);
    expect(await getJob(id, { db: v1 })).toMatchObject({ status: "done", payload: { card: SECRET, amount: 12 }, result: { receipt: `paid with ${SECRET}` } });
    // Without the codec (a dashboard or a CLI without the key): the ciphertext, never the plaintext.
    const plain = await getJob(id, { db: t.db });
    expect(plain?.payload).toEqual(expect.stringMatching(/^\$sealed:k1\./));
    expect(JSON.stringify(plain)).not.toContain(SECRET);
  });

  it("the error message is ciphertext in the table and plaintext through the codec", async () => {
    const queue = uniqueName("sealed-error");
    const id = await enqueue("charge", { card: SECRET }, { db: v1, queue });
    await processOne(
      {
        charge: (payload) => {
          throw new Error(`card ${(payload as { card: string }).card} declined`);
        },
      },
      { db: v1, queue },
    );
    const row = await raw(id);
    expect(row.last_error).not.toContain(SECRET);
    expect(row.last_error).toMatch(/^\$sealed:k1\./);
    const job = await getJob(id, { db: v1 });
    expect(job).toMatchObject({ status: "failed" });
    expect(job?.lastError).toContain(`card ${SECRET} declined`);
  });

  it("rotation: new rows use the current key, old rows still open with the old key kept", async () => {
    const queue = uniqueName("rotation");
    const old = await enqueue("charge", { card: SECRET, n: 1 }, { db: v1, queue });
    const fresh = await enqueue("charge", { card: SECRET, n: 2 }, { db: v2, queue });
    expect(stored((await raw(old)).payload)).toMatch(/^"?\$sealed:k1\./);
    expect(stored((await raw(fresh)).payload)).toMatch(/^"?\$sealed:k2\./);
    const seen: unknown[] = [];
    const handlers = { charge: (payload: unknown) => (seen.push(payload), "ok") };
    while (await processOne(handlers, { db: v2, queue }));
    expect(seen).toEqual([
      { card: SECRET, n: 1 },
      { card: SECRET, n: 2 },
    ]);
    // The old job's result was written after the rotation: under the current key.
    expect(stored((await raw(old)).result)).toMatch(/^"?\$sealed:k2\./);
    expect((await getJob(old, { db: v2 }))?.result).toBe("ok");
  });

  it("a dependent reads its dependency's result as plaintext (ctx.dependencies())", async () => {
    const queue = uniqueName("sealed-deps");
    const first = await enqueue("charge", { card: SECRET }, { db: v1, queue });
    const then = await enqueue("report", null, { db: v1, queue, dependsOn: [first] });
    const results: unknown[] = [];
    const handlers = {
      charge: () => ({ last4: SECRET.slice(-4) }),
      report: async (_: unknown, ctx: { dependencies(): Promise<{ result: unknown }[]> }) => {
        results.push(...(await ctx.dependencies()).map((d) => d.result));
      },
    };
    while (await processOne(handlers, { db: v1, queue }));
    expect((await getJob(then, { db: v1 }))?.status).toBe("done");
    expect(results).toEqual([{ last4: SECRET.slice(-4) }]);
  });

  it("rows written before the codec read as they are", async () => {
    const queue = uniqueName("plain-before");
    const id = await enqueue("charge", { card: "plain" }, { db: t.db, queue });
    expect((await getJob(id, { db: v2 }))?.payload).toEqual({ card: "plain" });
  });

  it("a missing or wrong key: a clear error naming the key id, never the key; a worker without it fails the run and never calls the handler", async () => {
    const queue = uniqueName("wrong-key");
    const id = await enqueue("charge", { card: SECRET }, { db: v2, queue });
    const lacking = withCodec({ k1: K1 }, "k1");
    const wrong = withCodec({ k2: randomBytes(32) }, "k2");
    const missing = await getJob(id, { db: lacking }).catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(JobError);
    expect((missing as Error).message).toMatch(/key "k2", which this codec does not have \(it has k1\)/);
    const bad = await getJob(id, { db: wrong }).catch((error: unknown) => error);
    expect(bad).toBeInstanceOf(JobError);
    expect((bad as Error).message).toMatch(/cannot decrypt with key "k2"/);
    for (const error of [missing, bad] as Error[]) {
      for (const key of [K1, K2]) {
        expect(error.message).not.toContain(key.toString("base64"));
        expect(error.message).not.toContain(key.toString("hex"));
      }
    }
    let called = false;
    expect(await processOne({ charge: () => (called = true) }, { db: lacking, queue })).toBe(true);
    expect(called).toBe(false);
    const job = await getJob(id, { db: v2 });
    expect(job?.status).toBe("failed");
    expect(job?.lastError).toMatch(/key "k2", which this codec does not have/);
  });

  it("the dashboard's payload and error searches are refused, saying why", async () => {
    const dashboard = createDashboard({ db: v1, basePath: "/admin" });
    const server = createServer((req, res) => dashboard(req, res, () => res.end()));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/admin/jobs?q=${encodeURIComponent("payload.card=1")}`);
      expect(response.status).toBe(400);
      expect(await response.text()).toContain("encrypted in this database (payloadCodec)");
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    expect(readSearch("payload.card=1", true)).toEqual({ error: expect.stringMatching(/encrypted in this database \(payloadCodec\)/) });
    expect(readSearch("error:declined", true)).toEqual({ error: expect.stringMatching(/cannot search inside them/) });
    expect(readSearch("task:charge", true)).toEqual({ search: { kind: "task", text: "charge" } });
    expect(readSearch("payload.card=1", false)).toMatchObject({ search: { kind: "payload" } });
  });
});

describe("aesGcmCodec", () => {
  it("round-trips, with a fresh IV each time", () => {
    const codec = aesGcmCodec({ keys: { a: K1 }, current: "a" });
    const [x, y] = [codec.encode("hello"), codec.encode("hello")];
    expect(x).not.toBe(y);
    expect(x).toMatch(/^a\./);
    expect(codec.decode(x)).toBe("hello");
    expect(aesGcmCodec({ keys: { a: K1.toString("base64") }, current: "a" }).decode(y)).toBe("hello");
  });

  it("a tampered text or a swapped key id does not open", () => {
    const codec = aesGcmCodec({ keys: { a: K1, b: K1 }, current: "a" });
    const text = codec.encode("hello");
    const flipped = text.slice(0, -2) + (text.at(-2) === "A" ? "B" : "A") + text.at(-1)!;
    expect(() => codec.decode(flipped)).toThrow(/cannot decrypt with key "a"/);
    // The same key under another id: the id is authenticated, so it does not open either.
    expect(() => codec.decode(`b${text.slice(1)}`)).toThrow(/cannot decrypt with key "b"/);
  });

  it("refuses bad keys, naming the key id and never the key", () => {
    const short = randomBytes(16);
    const error = (() => {
      try {
        aesGcmCodec({ keys: { old: short }, current: "old" });
      } catch (e) {
        return e as Error;
      }
    })();
    expect(error).toBeInstanceOf(JobError);
    expect(error?.message).toBe('aesGcmCodec: key "old" must be 32 bytes (AES-256), got 16 (e.g. crypto.randomBytes(32), or its base64)');
    expect(() => aesGcmCodec({ keys: { a: K1 }, current: "b" })).toThrow(/current must be one of the key ids \(a\), got "b"/);
    expect(() => aesGcmCodec({ keys: { "a b": K1 }, current: "a b" })).toThrow(/key id "a b" must be/);
    expect(() => connect("sqlite::memory:", { payloadCodec: {} as never })).toThrow(/payloadCodec must be an object with encode\(text\) and decode\(text\)/);
  });
});
