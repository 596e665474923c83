import type { Exporter, Importer, Validation } from "@forge/import-export";
import type { AppDatabase, Sql } from "./db.js";

/** A row of the app's `contacts` table (per org, unique by email). */
export interface Contact {
  email: string;
  name: string;
  age: number | null;
}

export const CONTACTS_IMPORTER = "contacts";
export const CONTACTS_EXPORTER = "contacts";

const EMAIL = /^[^\s@<>()[\],;:"]+@[^\s@<>()[\],;:"]+\.[^\s@<>()[\],;:"]+$/;

export function isEmail(value: string): boolean {
  return value.length <= 254 && EMAIL.test(value);
}

/**
 * Checks one CSV row. Pure: no I/O. email required and valid, name required, age optional
 * integer 0–150. Every problem of the row is reported, not only the first.
 */
export function validateContact(row: Record<string, string | undefined>): Validation<Contact> {
  const errors: { field: string; message: string }[] = [];
  const email = (row.email ?? "").trim().toLowerCase();
  if (email === "") errors.push({ field: "email", message: "is required" });
  else if (!isEmail(email)) errors.push({ field: "email", message: `"${email}" is not a valid email address` });
  const name = (row.name ?? "").trim();
  if (name === "") errors.push({ field: "name", message: "is required" });
  else if (name.length > 200) errors.push({ field: "name", message: "is longer than 200 characters" });
  const rawAge = (row.age ?? "").trim();
  let age: number | null = null;
  if (rawAge !== "") {
    age = /^\d{1,3}$/.test(rawAge) ? Number(rawAge) : NaN;
    if (!(age >= 0 && age <= 150)) errors.push({ field: "age", message: `"${rawAge}" is not a whole number from 0 to 150` });
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: { email, name, age } };
}

/** Columns a contacts file must have, and the other spellings spreadsheets use for them. */
export const CONTACTS_HEADER = {
  required: ["email", "name"],
  optional: ["age"],
  aliases: { email: ["E-mail address", "Email address", "Mail"], name: ["Full name", "Contact name"] },
} as const;

/** What writing `values` will do to the org's contacts, read before the write: how many are created, updated, unchanged. */
export async function batchCounts(
  sql: Sql,
  contacts: string,
  org: string,
  values: readonly Contact[],
): Promise<{ created: number; updated: number; unchanged: number }> {
  const emails = values.map((c) => c.email);
  // PostgreSQL plans `email IN (…)` of a whole batch as a walk through the org's contacts (it
  // prices hundreds of index lookups above one scan), so every batch of a large import would
  // re-read everything imported before it. One lookup per email, in a subquery the planner
  // cannot merge into a join (LIMIT), keeps each batch's read to its own rows. SQLite looks
  // up an IN list through the index by itself.
  const [text, params] =
    sql.dialect === "postgres"
      ? [
          `SELECT c.email, c.name, c.age FROM unnest($2::text[]) AS k(email)
           CROSS JOIN LATERAL (SELECT email, name, age FROM ${contacts} WHERE org = $1 AND email = k.email LIMIT 1) AS c`,
          [org, emails],
        ]
      : [`SELECT email, name, age FROM ${contacts} WHERE org = $1 AND email IN (${emails.map((_, i) => `$${i + 2}`).join(", ")})`, [org, ...emails]];
  const { rows } = await sql.query<{ email: string; name: string; age: number | string | null }>(text, params);
  const before = new Map(rows.map((r) => [r.email, r]));
  const counts = { created: 0, updated: 0, unchanged: 0 };
  for (const c of values) {
    const old = before.get(c.email);
    if (old === undefined) counts.created += 1;
    else if (old.name === c.name && (old.age === null ? null : Number(old.age)) === c.age) counts.unchanged += 1;
    else counts.updated += 1;
  }
  return counts;
}

/**
 * The rows of `values` for `INSERT INTO contacts (org, email, name, age) <rows>`, and their
 * parameters. PostgreSQL: three arrays through unnest, one short statement for the server to
 * parse whatever the batch's size. Elsewhere: a VALUES list, four parameters a row.
 */
export function contactRows(dialect: Sql["dialect"], org: string, values: readonly Contact[]): { rows: string; params: unknown[] } {
  if (dialect === "postgres") {
    return {
      rows: "SELECT $1, * FROM unnest($2::text[], $3::text[], $4::int[])",
      params: [org, values.map((c) => c.email), values.map((c) => c.name), values.map((c) => c.age)],
    };
  }
  const params: unknown[] = [];
  const tuples = values.map((c) => `($${params.push(org)}, $${params.push(c.email)}, $${params.push(c.name)}, $${params.push(c.age)})`);
  return { rows: `VALUES ${tuples.join(", ")}`, params };
}

/**
 * The importer for one org's contacts. `tx` is what the queue's checkpoint hands the
 * handler's work: the batch commits with the import's progress, or not at all. An email
 * (the natural key) seen again updates the contact, so importing a file twice duplicates
 * nothing; the counts of created, updated and unchanged contacts go to the report.
 */
export function contactsImporter(db: AppDatabase, org: string): Importer<Contact> {
  const postgres = db.jobs.dialect === "postgres";
  return {
    header: { required: [...CONTACTS_HEADER.required], optional: [...CONTACTS_HEADER.optional], aliases: CONTACTS_HEADER.aliases },
    naturalKey: ["email"],
    validate: (row) => validateContact(row),
    async writeBatch(values, tx) {
      // The handler passes one row per email (the last one wins): ON CONFLICT cannot touch a row twice.
      if (values.length === 0) return { created: 0, updated: 0, unchanged: 0 };
      const sql = db.on(tx);
      const counts = await batchCounts(sql, db.contacts, org, values);
      // An unchanged contact is not rewritten: its updated_at keeps meaning "last changed".
      const changed = postgres ? "(c.name, c.age) IS DISTINCT FROM (excluded.name, excluded.age)" : "c.name IS NOT excluded.name OR c.age IS NOT excluded.age";
      const now = postgres ? "now()" : "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
      const { rows, params } = contactRows(sql.dialect, org, values);
      await sql.query(
        `INSERT INTO ${db.contacts} AS c (org, email, name, age) ${rows}
         ON CONFLICT (org, email) DO UPDATE SET name = excluded.name, age = excluded.age, updated_at = ${now} WHERE ${changed}`,
        params,
      );
      return counts;
    },
  };
}

const PAGE = 500;

/** The exporter for one org's contacts: keyset pages of 500, so memory stays flat on any size. */
export function contactsExporter(db: AppDatabase, org: string): Exporter<unknown> {
  return {
    columns: ["email", "name", "age"],
    async *rows(_params, { signal }) {
      let after = 0;
      for (;;) {
        signal.throwIfAborted();
        const { rows } = await db.sql.query<{ id: number | string; email: string; name: string; age: number | null }>(
          `SELECT id, email, name, age FROM ${db.contacts} WHERE org = $1 AND id > $2 ORDER BY id LIMIT ${PAGE}`,
          [org, after],
        );
        for (const row of rows) yield { email: row.email, name: row.name, age: row.age ?? "" };
        if (rows.length < PAGE) return;
        after = Number(rows[rows.length - 1]!.id);
      }
    },
  };
}

/** Contacts of an org, for the demo and the tests. */
export async function countContacts(db: AppDatabase, org: string): Promise<number> {
  const { rows } = await db.sql.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${db.contacts} WHERE org = $1`, [org]);
  return Number(rows[0]?.n ?? 0);
}
