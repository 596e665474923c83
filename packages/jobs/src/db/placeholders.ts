/**
 * Rewrites `$1 … $n` into positional `?` and reorders the parameters to match, for drivers
 * that only know `?` (better-sqlite3, mysql2). A `$n` may appear several times.
 */
const cache = new Map<string, { sql: string; order: number[] }>();

export function toQuestionMarks(sql: string, params: readonly unknown[]): { sql: string; params: unknown[] } {
  let compiled = cache.get(sql);
  if (!compiled) {
    const order: number[] = [];
    const text = sql.replace(/\$(\d+)/g, (_m, n: string) => {
      order.push(Number(n) - 1);
      return "?";
    });
    compiled = { sql: text, order };
    if (cache.size < 1000) cache.set(sql, compiled);
  }
  return { sql: compiled.sql, params: compiled.order.map((i) => params[i]) };
}
