import type { DialectName } from "../db/executor.js";
import type { Dialect } from "./dialect.js";
import { mysql } from "./mysql.js";
import { postgres } from "./postgres.js";
import { sqlite } from "./sqlite.js";

const DIALECTS: Record<DialectName, Dialect> = { postgres, sqlite, mysql };

export function dialectFor(name: DialectName): Dialect {
  return DIALECTS[name];
}

export type { Dialect } from "./dialect.js";
