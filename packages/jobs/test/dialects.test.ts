import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob } from "../src/index.js";
import { columnList, decodeRow, JOB_COLUMNS } from "../src/core/job-row.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

/** Each backend's dialect object (`db.sql`) says what its database does: checked against the database itself. */
describe.each(backends())("the dialect ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("is the one of the backend", () => {
    expect(t.db.sql.name).toBe(t.db.dialect);
  });

  it("reads the database clock, and offsets it by seconds given as a parameter", async () => {
    const [row] = await t.sql<{ now: unknown; later: unknown; earlier: unknown }>(
      `SELECT ${t.db.sql.now} AS now, ${t.db.sql.nowPlus("$1")} AS later, ${t.db.sql.nowPlus("$1", "-")} AS earlier`,
      [90.5],
    );
    const [now, later, earlier] = [row!.now, row!.later, row!.earlier].map((v) => (v instanceof Date ? v.getTime() : Number(v)));
    expect(Math.abs(now! - (await t.now()).getTime())).toBeLessThan(5_000);
    expect(later! - now!).toBe(90_500);
    expect(now! - earlier!).toBe(90_500);
  });

  it("says truly whether UPDATE … RETURNING exists", async () => {
    const id = await enqueue("probe", null, { db: t.db });
    const attempt = t.sql(`UPDATE ${t.db.table} SET priority = priority WHERE id = $1 RETURNING id`, [id]);
    if (t.db.sql.returning) await expect(attempt).resolves.toEqual([expect.objectContaining({ id: expect.anything() })]);
    else await expect(attempt).rejects.toThrow();
  });

  it("makes claim tokens per row in SQL, or leaves them to the queue", async () => {
    if (t.db.sql.newToken === null) {
      expect(t.db.sql.returning).toBe(false);
      return;
    }
    const rows = await t.sql<{ a: string; b: string }>(`SELECT ${t.db.sql.newToken} AS a, ${t.db.sql.newToken} AS b`);
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    expect(String(rows[0]!.a)).toMatch(uuid);
    expect(rows[0]!.a).not.toBe(rows[0]!.b);
  });

  it("writes a timestamp as the same ISO-8601 text on every backend, and concatenates", async () => {
    const id = await enqueue("stamp", null, { db: t.db });
    await t.sql(`UPDATE ${t.db.table} SET heartbeat_at = run_at WHERE id = $1`, [id]);
    const [row] = await t.sql<{ text: string }>(
      `SELECT ${t.db.sql.concat(["'at '", t.db.sql.isoTimestamp("heartbeat_at")])} AS text FROM ${t.db.table} WHERE id = $1`,
      [id],
    );
    const job = await getJob(id, { db: t.db });
    expect(row!.text).toBe(`at ${job!.runAt.toISOString()}`);
  });

  it("passes a list parameter the way its driver sends arrays", async () => {
    const ids = [await enqueue("a", null, { db: t.db }), await enqueue("b", null, { db: t.db })];
    const rows = await t.sql<{ id: unknown }>(`SELECT id FROM ${t.db.table} WHERE ${t.db.sql.inList("id", "$1")} ORDER BY id`, [ids]);
    expect(rows.map((r) => Number(r.id))).toEqual(ids);
  });

  it("decodes a row through the one codec, epoch timestamps or not, as getJob does", async () => {
    const id = await enqueue("codec", { n: 1, s: "x" }, { db: t.db, priority: 3, tenant: "acme" });
    const job = await getJob(id, { db: t.db });
    for (const epochTimestamps of [false, true]) {
      const [raw] = await t.sql(`SELECT ${columnList(t.db.sql, JOB_COLUMNS, { epochTimestamps })} FROM ${t.db.table} WHERE id = $1`, [id]);
      const row = decodeRow(t.db.sql, JOB_COLUMNS, raw!);
      expect(row).toMatchObject({ id, task: "codec", payload: { n: 1, s: "x" }, priority: 3, tenant: "acme", status: "pending", started_at: null });
      expect(row.created_at.getTime()).toBe(job!.createdAt.getTime());
      expect(row.run_at.getTime()).toBe(job!.runAt.getTime());
    }
  });
});
