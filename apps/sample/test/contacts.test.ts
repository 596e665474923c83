// The contacts importer's batches: what a batch reads before it writes, and what it writes. An
// import re-reads the emails of every batch (for its created/updated/unchanged counts), so that
// read must find them through the (org, email) index: a read that walks the org's contacts makes
// a large import quadratic. On PostgreSQL the rows travel as arrays, which must carry any text.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { batchCounts, contactRows, contactsImporter, type Contact } from "../src/contacts.js";
import { backendNames, createEnv, type Env } from "./support.js";

const names = await backendNames();
const ORG = "org-batch-read";
/** Contacts already in the org: far more than one batch. */
const EXISTING = 5_000;

describe.each(names)("the contacts importer's batches (%s)", (name) => {
  let env: Env;

  beforeAll(async () => {
    env = await createEnv(name);
    const rows = Array.from({ length: EXISTING }, (_, i) => ({ email: `c${i}@example.org`, name: `C ${i}`, age: i % 100 }));
    for (let at = 0; at < rows.length; at += 500) {
      const chunk = contactRows(env.db.sql.dialect, ORG, rows.slice(at, at + 500));
      await env.db.sql.query(`INSERT INTO ${env.db.contacts} (org, email, name, age) ${chunk.rows}`, chunk.params);
    }
    // With fresh statistics, as in a long-running app.
    await env.db.sql.query(name === "postgres" ? `ANALYZE ${env.db.contacts}` : "ANALYZE");
  });
  afterAll(() => env?.close());

  /** 500 emails: 200 existing and unchanged, 100 existing with a new name, 200 new. */
  const batch: Contact[] = [
    ...Array.from({ length: 200 }, (_, i) => ({ email: `c${i}@example.org`, name: `C ${i}`, age: i % 100 })),
    ...Array.from({ length: 100 }, (_, i) => ({ email: `c${1000 + i}@example.org`, name: "Renamed", age: (1000 + i) % 100 })),
    ...Array.from({ length: 200 }, (_, i) => ({ email: `new${i}@example.org`, name: `N ${i}`, age: null })),
  ];

  it("counts what the batch will create, update and leave unchanged", async () => {
    expect(await batchCounts(env.db.sql, env.db.contacts, ORG, batch)).toEqual({ created: 200, updated: 100, unchanged: 200 });
  });

  it("the importer writes any text as it is, and a second write of the same rows changes nothing", async () => {
    const org = "org-awkward";
    const awkward: Contact[] = [
      { email: "quote@example.org", name: 'O"Brien, {the} \\ one', age: null },
      { email: "null@example.org", name: "NULL", age: 0 },
      { email: "accent@example.org", name: "Zoë Ångström — 東京", age: 150 },
    ];
    const importer = contactsImporter(env.db, org);
    expect(await importer.writeBatch(awkward, undefined)).toEqual({ created: 3, updated: 0, unchanged: 0 });
    const { rows } = await env.db.sql.query<Contact>(`SELECT email, name, age FROM ${env.db.contacts} WHERE org = $1 ORDER BY email`, [org]);
    expect(rows.map((r) => ({ ...r, age: r.age === null ? null : Number(r.age) }))).toEqual([...awkward].sort((a, b) => a.email.localeCompare(b.email)));
    expect(await importer.writeBatch(awkward, undefined)).toEqual({ created: 0, updated: 0, unchanged: 3 });
    expect(await importer.writeBatch([{ ...awkward[1]!, age: 1 }], undefined)).toEqual({ created: 0, updated: 1, unchanged: 0 });
  });

  it.runIf(name === "postgres")("reads only the batch's own rows, through the index, however many the org has", async () => {
    const read = await env.db.sql.transaction(async (tx) => {
      // The leader's counts only: parallel workers report theirs elsewhere.
      await tx.query(`SET LOCAL max_parallel_workers_per_gather = 0`);
      // Read before and after: the view may also hold this connection's counts not yet reported.
      const counters = async () => {
        const { rows } = await tx.query<{ seq: string; idx: string }>(
          `SELECT COALESCE(seq_tup_read, 0) AS seq, COALESCE(idx_tup_fetch, 0) AS idx FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`,
          [env.db.contacts],
        );
        return { seq: Number(rows[0]!.seq), idx: Number(rows[0]!.idx) };
      };
      const before = await counters();
      await batchCounts(tx, env.db.contacts, ORG, batch);
      const after = await counters();
      return { seq: after.seq - before.seq, idx: after.idx - before.idx };
    });
    // 300 of the batch's emails exist: a read that walks the org fetches all 5,000.
    expect(read.seq).toBe(0);
    expect(read.idx).toBeLessThanOrEqual(batch.length);
  });
});
