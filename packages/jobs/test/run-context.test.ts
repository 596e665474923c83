/* eslint-disable @typescript-eslint/unbound-method -- what this file checks: ctx's methods called apart from ctx */
// The ctx a handler gets (run/context.ts): one object per run whose methods are made on first
// use. A handler may take the methods apart and call them alone; logging ctx shows the job and
// not the run's internals (the database, its settings and payload codec).
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { aesGcmCodec, checkpointIn, enqueue, getJob, JobsDatabase, processOne, type JobContext } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("the handler's ctx ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("its methods work taken apart from it, keep their identity, and a copy of ctx is no context", async () => {
    const q = "ctx-apart";
    const id = await enqueue("apart", { n: 1 }, { db: t.db, queue: q });
    let seen: { same: boolean; copyRefused: boolean; signal: boolean } | null = null;
    await processOne(
      {
        apart: async (_payload: unknown, ctx: JobContext) => {
          const { step, heartbeat, checkpoint, reportProgress, dependencies, batch, signal, job } = ctx;
          const first = await step("first", () => ({ job: job.id }));
          const owned = await heartbeat();
          const saved = await checkpoint({ at: 1 });
          await reportProgress({ rows: 5 });
          const deps = await dependencies();
          const summary = await batch();
          let copyRefused = false;
          await checkpointIn(t.db, { ...ctx }, { at: 2 }).catch(() => (copyRefused = true));
          seen = { same: ctx.step === step && ctx.heartbeat === heartbeat, copyRefused, signal: signal instanceof AbortSignal };
          return { first, owned, saved, deps: deps.length, summary, progress: ctx.progress };
        },
      },
      { db: t.db, queue: q },
    );
    const job = await getJob(id, { db: t.db });
    expect(job?.status).toBe("done");
    expect(job?.result).toEqual({ first: { job: id }, owned: true, saved: true, deps: 0, summary: null, progress: { at: 1 } });
    expect(job?.liveProgress).toEqual({ rows: 5 });
    expect(seen).toEqual({ same: true, copyRefused: true, signal: true });
  });

  it("a method replaced on ctx is the one its later callers get (a wrapper that records steps)", async () => {
    const q = "ctx-replaced";
    const id = await enqueue("replaced", null, { db: t.db, queue: q });
    const names: string[] = [];
    await processOne(
      {
        replaced: async (_payload: unknown, ctx: JobContext) => {
          const step = ctx.step;
          ctx.step = (name, fn) => (names.push(name), step(name, fn));
          return ctx.step("wrapped", () => 1);
        },
      },
      { db: t.db, queue: q },
    );
    expect(names).toEqual(["wrapped"]);
    expect((await getJob(id, { db: t.db }))?.result).toBe(1);
  });

  it("logging ctx shows the job, not the database or its payload codec", async () => {
    const q = "ctx-logged";
    const codec = aesGcmCodec({ keys: { k1: Buffer.alloc(32, 7).toString("base64") }, current: "k1" });
    const db = new JobsDatabase(t.db.executor, { ...t.db.settings, payloadCodec: codec });
    await enqueue("logged", null, { db, queue: q });
    let printed = "";
    await processOne({ logged: async (_payload: unknown, ctx: JobContext) => void (printed = inspect(ctx, { depth: 5 })) }, { db, queue: q });
    expect(printed).toContain("logged");
    expect(printed).not.toMatch(/executor|settings|payloadCodec|BwcHBwcH/);
  });
});
