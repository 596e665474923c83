import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, enqueueMany, getJob, JobError, pendingCount, retryJob, statusCounts } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("tenants ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("getJob with a tenant returns null for another tenant's job, exactly like a missing one", async () => {
    const id = await enqueue("report", null, { db: t.db, tenant: "org-a" });
    expect((await getJob(id, { db: t.db, tenant: "org-a" }))!.tenant).toBe("org-a");
    expect(await getJob(id, { db: t.db, tenant: "org-b" })).toBeNull();
    expect(await getJob(999_999_999, { db: t.db, tenant: "org-b" })).toBeNull();
    // Internal (worker-side) reads see every tenant: tenants scope what applications read, not what workers run.
    expect((await getJob(id, { db: t.db }))!.id).toBe(id);
  });

  it("statusCounts and pendingCount can be scoped to a tenant", async () => {
    await enqueue("x", null, { db: t.db, queue: "tq", tenant: "org-a" });
    await enqueue("x", null, { db: t.db, queue: "tq", tenant: "org-a" });
    await enqueue("x", null, { db: t.db, queue: "tq", tenant: "org-b" });
    await enqueue("x", null, { db: t.db, queue: "tq" });
    expect(await pendingCount({ db: t.db, queue: "tq" })).toBe(4);
    expect(await pendingCount({ db: t.db, queue: "tq", tenant: "org-a" })).toBe(2);
    expect(await pendingCount({ db: t.db, queue: "tq", tenant: "org-b" })).toBe(1);
    const [a] = await statusCounts({ db: t.db, queue: "tq", tenant: "org-a" });
    expect(a).toMatchObject({ queue: "tq", total: 2, counts: { pending: 2 } });
    const [c] = await statusCounts({ db: t.db, queue: "tq", tenant: "org-c" });
    expect(c).toMatchObject({ queue: "tq", total: 0, ready: 0 });
  });
});

describe.each(backends())("tenant scoping fails closed (audit 12.5) ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  async function rows(): Promise<unknown[]> {
    return t.sql("SELECT id, status, tenant, max_attempts FROM {all} ORDER BY id");
  }

  async function refusal(call: () => Promise<unknown>): Promise<unknown> {
    return call().then(
      (value) => ({ resolved: value }),
      (error: unknown) => error,
    );
  }

  // An explicit tenant that is empty or not a string is a caller's bug (an unset org id):
  // reading it as "no tenant" would hand out every tenant's jobs.
  const bad: [string, unknown][] = [
    ["empty string", ""],
    ["null", null],
    ["a number", 7],
    ["an object", { id: "org-a" }],
  ];

  it.each(bad)("every read and write refuses a tenant that is %s, and writes nothing", async (_what, tenant) => {
    const pending = await enqueue("scoped", null, { db: t.db, queue: "scope", tenant: "org-a" });
    const failed = await enqueue("scoped", null, { db: t.db, queue: "scope", tenant: "org-a" });
    await t.sql("UPDATE {jobs} SET status = 'failed', finished_at = updated_at WHERE id = $1", [failed]);
    const before = await rows();
    const options = { db: t.db, tenant } as never;
    const calls: [string, () => Promise<unknown>][] = [
      ["getJob", () => getJob(pending, options)],
      ["pendingCount", () => pendingCount({ ...(options as object), queue: "scope" })],
      ["statusCounts", () => statusCounts({ ...(options as object), queue: "scope" })],
      ["cancelJob", () => cancelJob(pending, options)],
      ["retryJob", () => retryJob(failed, options)],
      ["enqueue", () => enqueue("scoped", null, { ...(options as object), queue: "scope" })],
      ["enqueueMany", () => enqueueMany([{ task: "scoped" }, { task: "scoped", tenant } as never], { db: t.db, queue: "scope" })],
    ];
    for (const [name, call] of calls) {
      const outcome = await refusal(call);
      expect(outcome, name).toBeInstanceOf(JobError);
      expect((outcome as JobError).message, name).toMatch(/tenant must be a non-empty string/);
    }
    expect(await rows()).toEqual(before);
  });

  it("an absent tenant (no key, or undefined) is unscoped", async () => {
    const id = await enqueue("scoped", null, { db: t.db, queue: "absent", tenant: "org-z" });
    expect((await getJob(id, { db: t.db, tenant: undefined }))!.tenant).toBe("org-z");
    expect(await pendingCount({ db: t.db, queue: "absent", tenant: undefined })).toBe(1);
    const untenanted = await enqueue("scoped", null, { db: t.db, queue: "absent", tenant: undefined });
    expect((await getJob(untenanted, { db: t.db }))!.tenant).toBeNull();
    expect(await cancelJob(id, { db: t.db, tenant: undefined })).toBe(true);
    expect(await retryJob(id, { db: t.db })).toBe(true);
  });

  it("cancelJob and retryJob refuse an unknown option instead of running unscoped", async () => {
    const id = await enqueue("scoped", null, { db: t.db, queue: "typo", tenant: "org-a" });
    await expect(cancelJob(id, { db: t.db, tenantId: "org-b" } as never)).rejects.toThrow(/unknown option "tenantId"/);
    await expect(retryJob(id, { db: t.db, org: "org-b" } as never)).rejects.toThrow(/unknown option "org"/);
    expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
  });
});
