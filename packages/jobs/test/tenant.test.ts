import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, pendingCount, statusCounts } from "../src/index.js";
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
    // Internal (worker-side) reads see every tenant, as in the seed.
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
