import type { Capabilities } from "./context.js";
import { ImportError, messageOf, retryableFailure, takenOver } from "./errors.js";
import type { Importer } from "./importer.js";
import type { RejectsFile } from "./rejects-file.js";
import type { ImportProgress, ReportBuilder, WriteCounts } from "./report.js";

/** A row that passed validation, with what a rejects file needs if the database refuses it. */
export interface PendingRow {
  value: unknown;
  line: number;
  fields: readonly string[];
}

/** Thrown inside a dry run's transaction so that the checkpoint rolls everything back. */
class RollBack extends Error {
  constructor(readonly counts: unknown) {
    super("dry run: rolled back");
  }
}

function isCount(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

export interface BatchWriterOptions {
  importer: Importer;
  capabilities: Capabilities;
  dryRun: boolean;
  report: ReportBuilder;
  rejects: RejectsFile | undefined;
}

/**
 * Writes one batch and saves the import's progress with it: in the checkpoint's transaction
 * when there is one, else on its own followed by a heartbeat. In a dry run the writes run
 * in a transaction that is rolled back (so the database's constraints still speak), and a
 * batch it refuses is tried again row by row to name the rows at fault.
 */
export class BatchWriter {
  constructor(private readonly o: BatchWriterOptions) {}

  /** The values to write: with a natural key, the last row of each key in the batch. */
  private unique(rows: readonly PendingRow[]): { values: unknown[]; duplicates: number } {
    const key = this.o.importer.naturalKey;
    if (key === undefined) return { values: rows.map((r) => r.value), duplicates: 0 };
    const byKey = new Map<string, unknown>();
    for (const { value } of rows) byKey.set(JSON.stringify(key.map((k) => (value as Record<string, unknown>)[k] ?? null)), value);
    return { values: [...byKey.values()], duplicates: rows.length - byKey.size };
  }

  private counted(result: unknown, rows: number, duplicates: number): void {
    if (this.o.importer.naturalKey === undefined || rows === 0) return;
    const c = result as Partial<WriteCounts> | undefined;
    if (!isCount(c?.created) || !isCount(c?.updated) || !isCount(c?.unchanged) || c!.created! + c!.updated! + c!.unchanged! !== rows) {
      throw new ImportError(
        `an importer with a naturalKey must have writeBatch return { created, updated, unchanged } adding up to the ${rows} rows it was given; got ${JSON.stringify(result)}`,
        { retryable: false },
      );
    }
    this.o.report.wrote(c as WriteCounts, duplicates);
  }

  /** Runs `values` through writeBatch in a transaction that is rolled back. */
  private async trial(values: unknown[]): Promise<{ ok: true; counts: unknown } | { ok: false; message: string }> {
    const checkpoint = this.o.capabilities.checkpoint!;
    try {
      const owned = await checkpoint(null, async (tx) => {
        throw new RollBack(await this.o.importer.writeBatch(values, tx));
      });
      if (!owned) throw takenOver(ImportError);
      throw new ImportError("the queue's checkpoint committed a dry run's writes", { retryable: false });
    } catch (error) {
      if (error instanceof RollBack) return { ok: true, counts: error.counts };
      if (error instanceof ImportError) throw error;
      return { ok: false, message: messageOf(error) };
    }
  }

  private async dryWrite(rows: readonly PendingRow[]): Promise<void> {
    const { values, duplicates } = this.unique(rows);
    if (values.length === 0) return;
    const whole = await this.trial(values);
    if (whole.ok) return this.counted(whole.counts, values.length, duplicates);
    // One row at a time, to say which ones the database refuses.
    for (const row of rows) {
      const one = await this.trial([row.value]);
      if (one.ok) {
        this.counted(one.counts, 1, 0);
        continue;
      }
      const message = `the database refused this row: ${one.message}`;
      this.o.report.refused(row.line, message);
      this.o.rejects?.add(row.line, row.fields, [{ field: "", message }]);
    }
  }

  /** `state(rejectsBytes)`: the progress to save with this batch. `line`: the batch's last line. */
  async write(rows: readonly PendingRow[], line: number, state: (rejectsBytes: number | undefined) => ImportProgress): Promise<void> {
    const { importer, capabilities, dryRun, rejects } = this.o;
    const { checkpoint, heartbeat } = capabilities;
    let owned: boolean;
    try {
      if (dryRun) await this.dryWrite(rows);
      const rejectsBytes = await rejects?.flush();
      if (checkpoint === undefined) {
        const { values, duplicates } = this.unique(rows);
        if (values.length > 0) this.counted(await importer.writeBatch(values, undefined), values.length, duplicates);
        owned = heartbeat === undefined || (await heartbeat());
      } else if (dryRun || rows.length === 0) {
        owned = await checkpoint(state(rejectsBytes));
      } else if (importer.naturalKey === undefined) {
        const values = rows.map((r) => r.value);
        owned = await checkpoint(state(rejectsBytes), (tx) => importer.writeBatch(values, tx));
      } else {
        // Progress as a function: the counts of what the upsert did are known only after it ran.
        const { values, duplicates } = this.unique(rows);
        owned = await checkpoint(
          (result: unknown) => {
            this.counted(result, values.length, duplicates);
            return state(rejectsBytes);
          },
          (tx) => importer.writeBatch(values, tx),
        );
      }
    } catch (error) {
      throw retryableFailure(ImportError, `writing the batch that ends on line ${line} failed`, error);
    }
    if (!owned) throw takenOver(ImportError);
  }
}
