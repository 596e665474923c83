import type { DialectName, Executor, QueryResult } from "../db/executor.js";
import { dialectFor } from "../dialects/index.js";

/** SQL that differs per backend; everything else is written once. Every dialect must have an entry. */
export type PerDialect<T> = Record<DialectName, T>;

/**
 * Where one statement is not enough (MariaDB has no UPDATE … RETURNING), a dialect's entry
 * can be a short script instead: it gets the executor and the same parameters the statement
 * would have had, and runs what it needs (usually in one transaction).
 */
export type Script<R extends object> = (executor: Executor, params: unknown[]) => Promise<QueryResult<R>>;

export function forDialect<T>(map: PerDialect<T>, dialect: DialectName, what: string): T {
  const found = map[dialect];
  if (found === undefined) throw new Error(`${what} is not implemented for ${dialect}`);
  return found;
}

/**
 * Runs a dialect's entry: a statement (with `$n` placeholders) or a script. `name` marks a hot
 * statement that the backend may keep prepared (PostgreSQL: parsed and planned once per connection).
 */
export function runSql<R extends object>(executor: Executor, sql: string | Script<R>, params: unknown[], name?: string): Promise<QueryResult<R>> {
  return typeof sql === "string" ? executor.query<R>(sql, params, name) : sql(executor, params);
}

/**
 * `(…), (…)` for a multi-row VALUES: `row(p)` writes one row, `p(k)` naming its k-th
 * parameter (1-based), numbered on from the rows before it.
 */
export function valuesList(rows: number, width: number, row: (p: (column: number) => string) => string): string {
  return Array.from({ length: rows }, (_, r) => row((column) => `$${r * width + column}`)).join(", ");
}

/** The database clock as an SQL expression (`db.sql.now`), for code that holds only the dialect's name. */
export function dbNow(dialect: DialectName): string {
  return dialectFor(dialect).now;
}

/**
 * Runs a fenced write over a worker's claims in id order — the lock order of every such
 * write (extendLeases, sendStarts, completeRuns), or two of them over the same jobs on two
 * connections can deadlock — and returns the claim tokens it kept.
 */
export async function runOverClaims<C extends { id: number }>(
  executor: Executor,
  unordered: readonly C[],
  sql: string | Script<{ claim_token: string }>,
  params: (claims: C[]) => unknown[],
  name?: string,
): Promise<Set<string>> {
  if (unordered.length === 0) return new Set();
  const claims = [...unordered].sort((a, b) => a.id - b.id);
  const { rows } = await runSql(executor, sql, params(claims), name);
  return new Set(rows.map((r) => String(r.claim_token)));
}

/**
 * Consecutive groups of `items`, each at most `maxRows` long and `maxBytes` large as `size`
 * counts an item; an item larger than `maxBytes` goes alone. For statements a server limits by
 * size (MariaDB's max_allowed_packet) or that would be too large to build at once.
 */
export function groupsBySize<T>(items: readonly T[], limit: { maxRows?: number; maxBytes: number }, size: (item: T) => number): T[][] {
  const groups: T[][] = [];
  let group: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const itemBytes = size(item);
    if (group.length > 0 && (group.length >= (limit.maxRows ?? Infinity) || bytes + itemBytes > limit.maxBytes)) {
      groups.push(group);
      group = [];
      bytes = 0;
    }
    group.push(item);
    bytes += itemBytes;
  }
  groups.push(group);
  return groups;
}
