// Schema parity (audit 13.6): the three backends' migrated schemas are the same table, except
// for the differences listed, with their reasons, in src/migrations/differences.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { latestVersion, migrate, TABLE_NAME, type JobsDatabase } from "../src/index.js";
import { COLUMN_TYPES, SCHEMA_DIFFERENCES, type OtherDialect } from "../src/migrations/differences.js";
import { STORED_COLUMNS } from "../src/core/job-row.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

/** Object name (`column x`, `index x`, `check x`, `primary key`) → its normalised description. */
type Shape = Map<string, string>;

interface RawColumn {
  name: string;
  type: string;
  notNull: boolean;
  /** Normalised: `now`, `identity`, a literal, or null. */
  default: string | null;
  /** A generated column's expression, normalised. */
  generated: string | null;
}

/** One spelling for the SQL each catalog prints back: no casts, quotes, brackets or `= ANY (ARRAY[…])`. */
function normaliseSql(sql: string): string {
  return sql
    .replace(/::[a-z_]+( varying)?/gi, "")
    .replace(/= ANY \(ARRAY\[(.*?)\]\)/g, "IN ($1)")
    .replace(/[()`"]/g, "")
    .replace(/\s*,\s*/g, ", ")
    .replace(/\b(in|and|or|is|not|null)\b/gi, (w) => w.toUpperCase())
    .replace(/\s+/g, " ")
    .trim();
}

function normaliseDefault(value: string | null): string | null {
  if (value === null || /^null$/i.test(value)) return null;
  if (/now\(\)|utc_timestamp|julianday/i.test(value)) return "now";
  // A boolean's default: PostgreSQL prints false/true, the others store 0/1 (COLUMN_TYPES).
  if (/^(false|true)$/i.test(value)) return /^true$/i.test(value) ? "1" : "0";
  return normaliseSql(value);
}

/** `CREATE [UNIQUE] INDEX … ON t (cols) [WHERE pred]` → `[UNIQUE ](cols)[ WHERE pred]`. */
function indexShape(unique: boolean, columns: string, predicate: string | null): string {
  return `${unique ? "UNIQUE " : ""}(${normaliseSql(columns)})${predicate ? ` WHERE ${normaliseSql(predicate)}` : ""}`;
}

/** A CHECK is named after the column it constrains (the first name in it): catalogs name them differently. */
function addChecks(shape: Shape, clauses: string[]): void {
  for (const clause of clauses) {
    const expression = normaliseSql(clause.replace(/^CHECK\s*/i, ""));
    shape.set(`check ${expression.split(" ")[0]}`, expression);
  }
}

async function postgresShape(db: JobsDatabase): Promise<{ columns: RawColumn[]; shape: Shape }> {
  const q = async <R extends object>(sql: string) => (await db.executor.query<R>(sql, [db.schema, TABLE_NAME])).rows;
  const relation = "(quote_ident($1) || '.' || quote_ident($2))::regclass";
  const columns = (
    await q<{ name: string; type: string; nullable: string; dflt: string | null; identity: string; generated: string }>(
      `SELECT column_name AS name, data_type AS type, is_nullable AS nullable, column_default AS dflt, is_identity AS identity, is_generated AS generated
       FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
    )
  ).map((c) => ({
    name: c.name,
    type: c.type,
    notNull: c.nullable === "NO",
    default: c.identity === "YES" ? "identity" : normaliseDefault(c.dflt),
    generated: c.generated === "ALWAYS" ? "?" : null,
  }));
  const shape: Shape = new Map();
  const indexes = await q<{ name: string; unique: boolean; primary: boolean; def: string; predicate: string | null }>(
    `SELECT c.relname AS name, i.indisunique AS unique, i.indisprimary AS primary, pg_get_indexdef(i.indexrelid) AS def,
            pg_get_expr(i.indpred, i.indrelid) AS predicate
     FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = ${relation}`,
  );
  for (const index of indexes) {
    const columnList = /USING \w+ \((.*?)\)(?: WHERE |$)/.exec(index.def)![1]!;
    if (index.primary) shape.set("primary key", `(${columnList})`);
    else shape.set(`index ${index.name}`, indexShape(index.unique, columnList, index.predicate));
  }
  const checks = await q<{ def: string }>(`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = ${relation} AND contype = 'c'`);
  addChecks(
    shape,
    checks.map((c) => c.def),
  );
  return { columns, shape };
}

async function sqliteShape(db: JobsDatabase): Promise<{ columns: RawColumn[]; shape: Shape }> {
  const q = async <R extends object>(sql: string) => (await db.executor.query<R>(sql)).rows;
  const info = await q<{ name: string; type: string; notnull: number; dflt_value: string | null; pk: number; hidden: number }>(
    `SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo('${TABLE_NAME}')`,
  );
  const [table] = await q<{ sql: string }>(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = '${TABLE_NAME}'`);
  const autoincrement = /PRIMARY KEY AUTOINCREMENT/i.test(table!.sql);
  const columns = info.map((c) => ({
    name: c.name,
    type: c.type.toLowerCase(),
    // An INTEGER PRIMARY KEY is the rowid: never null, whatever the pragma says.
    notNull: c.notnull === 1 || c.pk === 1,
    default: c.pk === 1 && autoincrement ? "identity" : normaliseDefault(c.dflt_value),
    generated: c.hidden === 2 || c.hidden === 3 ? "?" : null,
  }));
  const shape: Shape = new Map();
  const pk = info.filter((c) => c.pk > 0).sort((a, b) => a.pk - b.pk);
  shape.set("primary key", `(${pk.map((c) => c.name).join(", ")})`);
  const indexes = await q<{ name: string; sql: string }>(
    `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = '${TABLE_NAME}' AND sql IS NOT NULL`,
  );
  for (const index of indexes) {
    const [, unique, columnList, predicate] = /^CREATE (UNIQUE )?INDEX .*? ON \S+ \((.*?)\)(?:\s+WHERE\s+([\s\S]*))?$/i.exec(index.sql)!;
    shape.set(`index ${index.name}`, indexShape(Boolean(unique), columnList!, predicate ?? null));
  }
  addChecks(shape, checkClauses(table!.sql));
  return { columns, shape };
}

/** The CHECK (…) clauses of a CREATE TABLE, brackets balanced (SQLite keeps no catalog of them). */
function checkClauses(createTable: string): string[] {
  const clauses: string[] = [];
  for (const match of createTable.matchAll(/CHECK\s*\(/gi)) {
    let depth = 0;
    let end = match.index + match[0].length - 1;
    do {
      if (createTable[end] === "(") depth++;
      else if (createTable[end] === ")") depth--;
      end++;
    } while (depth > 0);
    clauses.push(createTable.slice(match.index, end));
  }
  return clauses;
}

async function mysqlShape(db: JobsDatabase): Promise<{ columns: RawColumn[]; shape: Shape }> {
  const q = async <R extends object>(sql: string) => (await db.executor.query<R>(sql, [db.schema, TABLE_NAME])).rows;
  const columns = (
    await q<{ name: string; type: string; nullable: string; dflt: string | null; extra: string; expression: string | null }>(
      `SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, IS_NULLABLE AS nullable, COLUMN_DEFAULT AS dflt, EXTRA AS extra,
              GENERATION_EXPRESSION AS expression
       FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = $1 AND TABLE_NAME = $2 ORDER BY ORDINAL_POSITION`,
    )
  ).map((c) => ({
    name: c.name,
    type: c.type.toLowerCase().replace(/^(bigint|int)\(\d+\)/, "$1"),
    notNull: c.nullable === "NO",
    default: /auto_increment/i.test(c.extra) ? "identity" : /GENERATED/i.test(c.extra) ? null : normaliseDefault(c.dflt),
    generated: /GENERATED/i.test(c.extra) ? normaliseSql(c.expression ?? "?") : null,
  }));
  const shape: Shape = new Map();
  const statistics = await q<{ name: string; nonUnique: number | string; column: string; collation: string | null }>(
    `SELECT INDEX_NAME AS name, NON_UNIQUE AS nonUnique, COLUMN_NAME AS \`column\`, COLLATION AS collation
     FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = $1 AND TABLE_NAME = $2 ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
  );
  const byIndex = new Map<string, { unique: boolean; columns: string[] }>();
  for (const s of statistics) {
    const entry = byIndex.get(s.name) ?? { unique: Number(s.nonUnique) === 0, columns: [] };
    entry.columns.push(s.collation === "D" ? `${s.column} DESC` : s.column);
    byIndex.set(s.name, entry);
  }
  for (const [name, index] of byIndex) {
    if (name === "PRIMARY") shape.set("primary key", `(${index.columns.join(", ")})`);
    else shape.set(`index ${name}`, indexShape(index.unique, index.columns.join(", "), null));
  }
  const checks = await q<{ clause: string }>(
    `SELECT CHECK_CLAUSE AS clause FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = $1 AND TABLE_NAME = $2`,
  );
  addChecks(
    shape,
    checks.map((c) => c.clause),
  );
  return { columns, shape };
}

function describeColumn(column: RawColumn, type: string): string {
  return [type, column.notNull ? "NOT NULL" : "", column.default ? `DEFAULT ${column.default}` : "", column.generated ? `GENERATED AS ${column.generated}` : ""]
    .filter(Boolean)
    .join(" ");
}

/** Each column described with its PostgreSQL type when the backend's type is the documented equivalent of it. */
function withColumns(shape: Shape, columns: RawColumn[], dialect: OtherDialect | "postgres", reference: RawColumn[]): Shape {
  const pgTypes = new Map(reference.map((c) => [c.name, c.type]));
  for (const column of columns) {
    const pgType = pgTypes.get(column.name);
    const same = dialect === "postgres" || (pgType !== undefined && COLUMN_TYPES[dialect][pgType]?.types.includes(column.type));
    shape.set(`column ${column.name}`, describeColumn(column, same ? pgType! : column.type));
  }
  return shape;
}

const SHAPES = { postgres: postgresShape, sqlite: sqliteShape, mysql: mysqlShape };
const chosen = backends();
const hasReference = chosen.some((b) => b.name === "postgres") && chosen.length > 1;

describe.skipIf(!hasReference)("schema parity (audit 13.6)", () => {
  const shapes = new Map<string, Shape>();
  const opened: TestDatabase[] = [];

  beforeAll(async () => {
    const migrated = await Promise.all(chosen.map(async (b) => ({ name: b.name, test: await b.create() })));
    opened.push(...migrated.map((m) => m.test));
    const raw = new Map(await Promise.all(migrated.map(async (m) => [m.name, await SHAPES[m.name](m.test.db)] as const)));
    const reference = raw.get("postgres")!.columns;
    for (const [name, { columns, shape }] of raw) shapes.set(name, withColumns(shape, columns, name, reference));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(opened.map((t) => t.close()));
  });

  it("PostgreSQL's schema is what the migration says (the test reads every catalog it compares)", () => {
    const pg = shapes.get("postgres")!;
    expect(pg.get("column id")).toBe("bigint NOT NULL DEFAULT identity");
    expect(pg.get("column status")).toBe("text NOT NULL DEFAULT 'pending'");
    expect(pg.get("column run_at")).toBe("timestamp with time zone NOT NULL DEFAULT now");
    expect(pg.get("primary key")).toBe("(id)");
    expect(pg.get("index jobs_claim_plain")).toBe("(queue, priority DESC, id) WHERE status = 'pending' AND group_key = '' AND concurrency_key = '' AND due");
    expect(pg.get("index jobs_scheduled")).toBe("(run_at) WHERE status = 'pending' AND group_key = '' AND concurrency_key = '' AND NOT due");
    expect(pg.get("index jobs_dedup_key_active")).toBe("UNIQUE (dedup_key) WHERE dedup_key IS NOT NULL AND status IN 'pending', 'running'");
    expect(pg.get("check status")).toBe("status IN 'pending', 'running', 'done', 'failed', 'cancelled', 'waiting'");
    expect(pg.get("check max_attempts")).toBe("max_attempts >= 1");
  });

  for (const backend of chosen.filter((b) => b.name !== "postgres")) {
    const dialect = backend.name as OtherDialect;
    it(`${dialect} has PostgreSQL's columns, indexes and constraints, but for the listed differences`, () => {
      const pg = shapes.get("postgres")!;
      const other = shapes.get(dialect)!;
      const found = [...new Set([...pg.keys(), ...other.keys()])]
        .filter((object) => pg.get(object) !== other.get(object))
        .map((object) => ({ object, postgres: pg.get(object) ?? null, is: other.get(object) ?? null }));
      const listed = SCHEMA_DIFFERENCES.filter((d) => d.dialect === dialect).map((d) => ({ object: d.object, is: d.is }));
      // Both ways: an unlisted difference is a drift, a listed one that no longer exists is a stale reason.
      expect(found.map(({ object, is }) => ({ object, is })).sort((a, b) => a.object.localeCompare(b.object))).toEqual(
        [...listed].sort((a, b) => a.object.localeCompare(b.object)),
      );
    });
  }

  it("every listed difference and type mapping gives its reason", () => {
    for (const d of SCHEMA_DIFFERENCES) expect(d.reason.length, d.object).toBeGreaterThan(10);
    for (const types of Object.values(COLUMN_TYPES)) for (const [pg, m] of Object.entries(types)) expect(m.reason.length, pg).toBeGreaterThan(5);
  });
});

describe.each(backends())("migration 3 ($name)", (backend) => {
  it("drops the (queue, finished_at) index, and on PostgreSQL and SQLite the claim_token one, that earlier schemas hold (audit 13.6)", async () => {
    const t = await backend.create();
    try {
      const stale = backend.name === "mysql" ? ["jobs_recent_finished"] : ["jobs_recent_finished", "jobs_claim_token"];
      for (const name of stale) await t.sql(`CREATE INDEX ${name} ON {jobs} (${name === "jobs_claim_token" ? "claim_token" : "queue, finished_at"})`);
      await t.sql(`DELETE FROM ${t.db.migrationsTable} WHERE version = 3`);
      expect(await migrate({ db: t.db })).toEqual({ applied: [3], version: latestVersion(backend.name) });
      const { shape } = await SHAPES[backend.name](t.db);
      for (const name of stale) expect(shape.has(`index ${name}`), name).toBe(false);
      if (backend.name === "mysql") expect(shape.get("index jobs_claim_token")).toBe("(claim_token)");
    } finally {
      await t.close();
    }
  });
});

describe.each(backends())("one column list for both tables ($name)", (backend) => {
  it("STORED_COLUMNS is the stored columns of the live table and of jobs_history, in order (a move copies them by that list)", async () => {
    const t = await backend.create();
    try {
      const stored = async (table: string): Promise<string[]> => {
        const sql = {
          postgres: `SELECT column_name AS name FROM information_schema.columns
                     WHERE table_schema = $1 AND table_name = $2 AND is_generated = 'NEVER' ORDER BY ordinal_position`,
          sqlite: `SELECT name FROM pragma_table_xinfo($2) WHERE hidden = 0 AND $1 IS NULL ORDER BY cid`,
          mysql: `SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS
                  WHERE TABLE_SCHEMA = $1 AND TABLE_NAME = $2 AND EXTRA NOT LIKE '%GENERATED%' ORDER BY ORDINAL_POSITION`,
        }[backend.name];
        return (await t.sql<{ name: string }>(sql, [backend.name === "sqlite" ? null : t.schema, table])).map((r) => r.name);
      };
      expect(await stored(TABLE_NAME)).toEqual([...STORED_COLUMNS]);
      expect(await stored("jobs_history")).toEqual([...STORED_COLUMNS]);
    } finally {
      await t.close();
    }
  });
});
