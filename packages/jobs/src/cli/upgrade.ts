import { upgradeFinished, UPGRADE_BATCH } from "../maintenance/upgrade.js";
import { openDatabase, type Io, type Parsed } from "./commands.js";
import { UsageError } from "./usage.js";

/** How often a long upgrade says how far it got. */
const PROGRESS_EVERY_MS = 5000;

/**
 * `forge-jobs upgrade [--batch-size N]`: moves the ended jobs an older version left in the live
 * table into history, while workers keep running (maintenance/upgrade.ts). Killed, it loses
 * nothing: run it again and it carries on.
 */
export async function upgradeCommand(p: Parsed, io: Io): Promise<void> {
  const text = p.values["batch-size"] as string | undefined;
  const batchSize = text === undefined ? UPGRADE_BATCH : Number(text);
  if (!(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= 100_000)) {
    throw new UsageError(`--batch-size must be a whole number from 1 to 100000, got ${JSON.stringify(text)}`);
  }
  const db = openDatabase(p);
  const started = performance.now();
  let said = started;
  try {
    const result = await upgradeFinished(db, {
      batchSize,
      // SQLite has one writer, and its busy handler polls: without a pause, workers waiting to
      // write could miss the gaps between back-to-back batches for seconds. The file is shared
      // half and half; PostgreSQL and MariaDB lock rows only and need no pause.
      ...(db.dialect === "sqlite" ? { pauseMs: (batchMs: number) => batchMs } : {}),
      onBatch: (moved) => {
        const now = performance.now();
        if (now - said < PROGRESS_EVERY_MS) return;
        said = now;
        io.err(`moved ${moved} so far (${Math.round(moved / ((now - started) / 1000))}/s)\n`);
      },
    });
    const seconds = (performance.now() - started) / 1000;
    io.out(`moved ${result.moved} ended job(s) from the live table into history in ${seconds.toFixed(1)}s\n`);
    io.out(
      result.remaining === 0
        ? "the live table holds no ended job: the upgrade is complete\n"
        : `${result.remaining} ended job(s) left in the live table (locked by other work while this ran): run forge-jobs upgrade again\n`,
    );
  } finally {
    await db.close();
  }
}
