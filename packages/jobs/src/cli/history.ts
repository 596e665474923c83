import { historyPartitions, pruneHistory } from "../maintenance/admin.js";
import { openDatabase, type Io, type Parsed } from "./commands.js";
import { renderTable } from "./table.js";
import { UsageError, parseDuration } from "./usage.js";

function size(bytes: number): string {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let n = bytes;
  let unit = 0;
  while (n >= 1024 && unit < units.length - 1) {
    n /= 1024;
    unit++;
  }
  return `${unit === 0 ? n : n.toFixed(1)} ${units[unit]}`;
}

/** `forge-jobs history [--json]` and `forge-jobs history --drop-older-than <duration>` (PostgreSQL). */
export async function historyCommand(p: Parsed, io: Io): Promise<void> {
  if (p.positionals.length > 0) throw new UsageError(`history takes no arguments, got ${JSON.stringify(p.positionals[0])}`);
  const drop = p.values["drop-older-than"] as string | undefined;
  if (drop !== undefined && p.values.json) throw new UsageError("--json lists the days; it does not go with --drop-older-than");
  const olderThan = drop === undefined ? undefined : parseDuration(drop, "--drop-older-than");
  const db = openDatabase(p, { reading: olderThan === undefined });
  try {
    if (olderThan !== undefined) {
      const dropped = await pruneHistory({ db, olderThan });
      io.out(dropped.length ? `dropped ${dropped.length} day(s) of history: ${dropped.join(", ")}\n` : `no day of history ended more than ${drop} ago\n`);
      return;
    }
    const days = await historyPartitions({ db });
    if (p.values.json) io.out(JSON.stringify(days, null, 2) + "\n");
    else
      io.out(
        days.length
          ? renderTable(
              ["DAY", "ROWS", "SIZE"],
              days.map((d) => [d.day, String(d.rows), size(d.bytes)]),
            )
          : "the history table is empty\n",
      );
  } finally {
    await db.close();
  }
}
