/**
 * Rewrites `$1 … $n` into positional `?` and reorders the parameters to match, for drivers
 * that only know `?` (better-sqlite3, mysql2). A `$n` may appear several times.
 */
const cache = new Map<string, { sql: string; order: number[]; inOrder: boolean }>();

export function toQuestionMarks(sql: string, params: readonly unknown[]): { sql: string; params: unknown[] } {
  let compiled = cache.get(sql);
  if (!compiled) {
    const order: number[] = [];
    const text = sql.replace(/\$(\d+)/g, (_m, n: string) => {
      order.push(Number(n) - 1);
      return "?";
    });
    // $1, $2, … each once and in order (an insert's rows): the parameters go as they are, not
    // copied one by one for every run of a statement of thousands of them.
    compiled = { sql: text, order, inOrder: order.every((n, i) => n === i) };
    if (cache.size < 1000) cache.set(sql, compiled);
  }
  if (compiled.inOrder && params.length === compiled.order.length) return { sql: compiled.sql, params: params as unknown[] };
  return { sql: compiled.sql, params: compiled.order.map((i) => params[i]) };
}
