import { measureImportWrites, type Options } from "../../import-export/import-writes.js";
import type { Row } from "../lib/report.js";
import { addSample, settle, type Ctx } from "./common.js";

/**
 * Issue 21.7: the sample's contacts import with real writes (bench/import-export/import-writes.ts),
 * 1,000,000 rows (100,000 with --quick) imported by one job in a child process, every row
 * written inside the queue's checkpoints. Target on PostgreSQL: the plain-insert importer
 * ≥ 100,000 rows/s with peak RSS < 150 MB. The PostgreSQL inserts run every round; the upsert
 * and the other backends once (they are reported, not judged, and MariaDB's take ~40 s each).
 */
const RUNS: ReadonlyArray<{ id: string; label: string; o: Omit<Options, "rows">; everyRound: boolean }> = [
  { id: "postgres:insert:2000", label: "PostgreSQL, insert", o: { backend: "postgres", importer: "insert", batch: 2000 }, everyRound: true },
  { id: "postgres:insert:500", label: "PostgreSQL, insert", o: { backend: "postgres", importer: "insert", batch: 500 }, everyRound: true },
  { id: "postgres:upsert:2000", label: "PostgreSQL, upsert", o: { backend: "postgres", importer: "upsert", batch: 2000 }, everyRound: false },
  { id: "sqlite:insert:2000", label: "SQLite, insert", o: { backend: "sqlite", importer: "insert", batch: 2000 }, everyRound: false },
  { id: "sqlite:upsert:2000", label: "SQLite, upsert", o: { backend: "sqlite", importer: "upsert", batch: 2000 }, everyRound: false },
  { id: "mariadb:insert:2000", label: "MariaDB, insert", o: { backend: "mariadb", importer: "insert", batch: 2000 }, everyRound: false },
  { id: "mariadb:upsert:2000", label: "MariaDB, upsert", o: { backend: "mariadb", importer: "upsert", batch: 2000 }, everyRound: false },
];

export async function run(ctx: Ctx): Promise<void> {
  const rows = Number(process.env.BENCH_IMPORT_ROWS ?? ctx.sizes.importRows);
  const rounds = Math.max(1, Math.min(ctx.sizes.rounds, 3));
  const table = new Map<string, Row>();
  for (let r = 0; r < rounds; r++) {
    for (const spec of RUNS) {
      if (r > 0 && !spec.everyRound) continue;
      const row = table.get(spec.id) ?? {
        system: spec.id,
        label: `${spec.label}, batchSize ${spec.o.batch}`,
        config: `batchSize ${spec.o.batch}${spec.o.batch === 500 ? " (the default)" : ""}`,
        samples: {},
      };
      table.set(spec.id, row);
      try {
        await settle(ctx.admin);
        const m = await measureImportWrites({ ...spec.o, rows });
        addSample(row, "rows/s", m.rate);
        addSample(row, "peak RSS MB", m.peakRssMb);
        addSample(row, "RSS before MB", m.baseRssMb);
        process.stdout.write(`  ${spec.id} round ${r + 1}: ${Math.round(m.rate)} rows/s, peak RSS ${m.peakRssMb} MB (${m.baseRssMb} MB before)\n`);
      } catch (error) {
        ctx.skip(`import (${spec.id})`, (error as Error).message);
      }
    }
  }
  ctx.publish({
    id: "import-writes",
    title: `Import of ${rows.toLocaleString("en-US")} contacts with real writes`,
    unit: "rows/s",
    better: "higher",
    columns: ["rows/s", "peak RSS MB", "RSS before MB"],
    ref: "postgres:insert:2000",
    rows: [...table.values()].filter((row) => (row.samples["rows/s"]?.length ?? 0) > 0),
    notes: [
      `The sample app's contacts import (bench/import-export/import-writes.ts): a generated CSV (email, name, age) imported by one import job that an in-process worker runs in a child process (under tsx, as the sample's worker runs), every row written to the contacts table inside the queue's checkpoints. insert: one multi-row INSERT per batch (on PostgreSQL INSERT … SELECT FROM unnest); upsert: the sample's importer (reads the batch's emails, then INSERT … ON CONFLICT / ON DUPLICATE KEY UPDATE). Rate from the worker's start until the import job succeeded; peak RSS is the child's maxRSS, RSS before is the child's once its modules are loaded and its database open. The PostgreSQL inserts are the median of ${rounds} round(s); the other rows ran once. Target (PostgreSQL, insert): ≥ 100,000 rows/s with peak RSS < 150 MB.`,
    ],
  });
}
