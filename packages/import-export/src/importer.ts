import type { HeaderSpec } from "./header.js";
import type { WriteCounts } from "./report.js";

export interface FieldError {
  field: string;
  message: string;
}

export type Validation<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

/**
 * Turns CSV rows into values and writes them in batches. `Tx` is whatever the queue's
 * `ctx.checkpoint` hands its work function (for PostgreSQL, a pg client inside the
 * checkpoint's transaction); it is undefined when the handler runs without checkpoints.
 */
export interface Importer<T = unknown, Tx = unknown> {
  /**
   * The columns the file must (or may) have, checked on the header before any row: a file
   * without a required column fails the job at once. Matching ignores case, spaces, `-`,
   * `_` and `.`; `aliases` adds other spellings. Rows reach `validate` under these names.
   */
  header?: HeaderSpec;
  /**
   * Fields of a value that identify its row (an upsert's conflict target). Within a batch
   * the last row of a key wins, and `writeBatch` must return what it did with the rows:
   * `{ created, updated, unchanged }`, added up in the report.
   */
  naturalKey?: readonly string[];
  /** Pure: no I/O. A rejected row is data for the report, never an exception. */
  validate(row: Record<string, string>, line: number): Validation<T>;
  writeBatch(values: T[], tx: Tx | undefined): Promise<void | WriteCounts>;
}
