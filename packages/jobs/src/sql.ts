import type { DialectName } from "./db/executor.js";

/** SQL that differs per backend; everything else is written once. */
export type PerDialect<T> = Partial<Record<DialectName, T>>;

export function forDialect<T>(map: PerDialect<T>, dialect: DialectName, what: string): T {
  const found = map[dialect];
  if (found === undefined) throw new Error(`${what} is not implemented for ${dialect}`);
  return found;
}
