// The live table's indexes and the writes every run makes (issue 33, point 3): a start write and
// a lease extension change only the columns below; an index holding one of them (in its key or
// its predicate) makes each of those writes touch that index, and on PostgreSQL rules out a HOT
// update (a new row version that no index needs to learn of).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

  it.runIf(backend.name === "postgres")("PostgreSQL leaves room in each page for HOT updates (fillfactor 70)", async () => {
    const [row] = await t.sql<{ options: string[] | null }>(`SELECT reloptions AS options FROM pg_class WHERE oid = '${t.db.table}'::regclass`);
    expect(row?.options).toContain("fillfactor=70");
  });
});
