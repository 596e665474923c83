// The live table's indexes and the writes every run makes (issue 33, point 3): a start write and
// a lease extension change only the columns below; an index holding one of them (in its key or
// its predicate) makes each of those writes touch that index, and on PostgreSQL rules out a HOT
// update (a new row version that no index needs to learn of).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueueMany } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

const CHANGED_BY_START_AND_LEASE = ["locked_until", "heartbeat_at", "started_at", "attempts", "updated_at"];

describe.each(backends())("the live table's indexes ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** Index name → the text that defines it (key columns and predicate). */
  async function indexes(): Promise<Map<string, string>> {
    const name = t.db.table.replace(/["`]/g, "").split(".").pop()!;
    if (backend.name === "postgres") {
      const rows = await t.sql<{ name: string; def: string }>(
        `SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indrelid = '${t.db.table}'::regclass`,
      );
      return new Map(rows.map((r) => [r.name, r.def]));
    }
    if (backend.name === "sqlite") {
      const rows = await t.sql<{ name: string; def: string | null }>(`SELECT name, sql AS def FROM sqlite_master WHERE type = 'index' AND tbl_name = $1`, [
        name,
      ]);
      return new Map(rows.map((r) => [r.name, r.def ?? "(automatic)"]));
    }
    const rows = await t.sql<{ name: string; columns: string }>(
      `SELECT INDEX_NAME AS name, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS columns
       FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = $1 AND TABLE_NAME = $2 GROUP BY INDEX_NAME`,
      [t.schema, name],
    );
    return new Map(rows.map((r) => [r.name, r.columns]));
  }

  it("no index holds a column that a start write or a lease extension changes", async () => {
    const found = await indexes();
    expect(found.size).toBeGreaterThan(5);
    const offending = [...found].filter(([, def]) => CHANGED_BY_START_AND_LEASE.some((column) => new RegExp(`\\b${column}\\b`).test(def)));
    expect(offending).toEqual([]);
  });

  // MariaDB has no partial index: an index whose key holds status is rewritten by every claim.
  // Only the indexes a claim moves a job between may hold it; the scheduled jobs and the aging
  // ones are keyed on generated columns a plain job keeps NULL (migration 26).
  it.runIf(backend.name === "mysql")("MariaDB: a claim rewrites only the indexes it moves a job between", async () => {
    const found = await indexes();
    const withStatus = [...found].filter(([, columns]) => columns.split(",").includes("status")).map(([name]) => name);
    expect(withStatus.sort()).toEqual(["jobs_finished", "jobs_flow_claim", "jobs_running_queue"]);
    expect(found.get("jobs_scheduled")).toBe("scheduled_at");
    expect(found.get("jobs_aging")).toBe("aging_pending");
    const [plain, later, aged] = await enqueueMany(
      [
        { task: "indexes.plain", payload: null },
        { task: "indexes.later", payload: null, availableIn: 3600 },
        { task: "indexes.aged", payload: null, priorityAging: { everySeconds: 60 } },
      ],
      { db: t.db, queue: "indexes" },
    );
    const keys = async () =>
      (
        await t.sql<{ id: number; scheduled: unknown; aging: unknown }>(
          `SELECT id, scheduled_at AS scheduled, aging_pending AS aging FROM ${t.db.table} WHERE id IN ($1, $2, $3) ORDER BY id`,
          [plain, later, aged],
        )
      ).map((r) => [r.scheduled !== null, r.aging]);
    expect(await keys()).toEqual([
      [false, null],
      [true, null],
      [false, 60],
    ]);
    await t.sql(`UPDATE ${t.db.table} SET status = 'running' WHERE id IN ($1, $2, $3)`, [plain, later, aged]);
    expect(await keys()).toEqual([
      [false, null],
      [false, null],
      [false, null],
    ]);
  });

  it.runIf(backend.name === "postgres")("PostgreSQL leaves room in each page for HOT updates (fillfactor 70)", async () => {
    const [row] = await t.sql<{ options: string[] | null }>(`SELECT reloptions AS options FROM pg_class WHERE oid = '${t.db.table}'::regclass`);
    expect(row?.options).toContain("fillfactor=70");
  });
});
