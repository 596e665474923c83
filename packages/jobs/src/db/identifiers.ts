import type { DialectName } from "./executor.js";
import { JobError } from "../base/errors.js";

/** Identifiers are the only things interpolated into SQL, so they are checked, then quoted. */
export function checkIdentifier(name: string, what: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) {
    throw new JobError(`${what} must be letters, digits and underscores (max 63, not starting with a digit), got ${JSON.stringify(name)}`, what);
  }
  return name;
}

export function quoteIdent(dialect: DialectName, name: string): string {
  return dialect === "mysql" ? "`" + name.replace(/`/g, "``") + "`" : '"' + name.replace(/"/g, '""') + '"';
}

export function qualified(dialect: DialectName, schema: string | null, name: string): string {
  return schema ? `${quoteIdent(dialect, schema)}.${quoteIdent(dialect, name)}` : quoteIdent(dialect, name);
}
