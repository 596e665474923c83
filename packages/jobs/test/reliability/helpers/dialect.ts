import type { DialectName } from "../../../src/index.js";

/**
 * The few SQL spellings the reliability tables need that differ per backend. Everything else
 * in the suite is plain SQL with `$1` placeholders, run through the queue's own executor.
 */

/** An auto-increment primary key: its values follow insertion order, which the checks rely on. */
export function serialColumn(dialect: DialectName, name = "seq"): string {
  switch (dialect) {
    case "postgres":
      return `${name} bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY`;
    case "sqlite":
      return `${name} INTEGER PRIMARY KEY AUTOINCREMENT`;
    case "mysql":
      return `${name} BIGINT AUTO_INCREMENT PRIMARY KEY`;
  }
}

/** A short text column that may take part in a key (MariaDB cannot index unbounded TEXT). */
export function keyText(dialect: DialectName): string {
  return dialect === "mysql" ? "VARCHAR(191)" : "text";
}

/** INSERT that silently keeps the existing row on a unique conflict. */
export function insertIgnore(dialect: DialectName, table: string, columns: readonly string[]): string {
  const values = columns.map((_, i) => `$${i + 1}`).join(", ");
  return dialect === "mysql"
    ? `INSERT IGNORE INTO ${table} (${columns.join(", ")}) VALUES (${values})`
    : `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${values}) ON CONFLICT DO NOTHING`;
}

/** `col IN ($k, $k+1, …)` for a list of values, starting at placeholder `first`. */
export function inList(column: string, count: number, first = 1): string {
  return `${column} IN (${Array.from({ length: count }, (_, i) => `$${first + i}`).join(", ")})`;
}
