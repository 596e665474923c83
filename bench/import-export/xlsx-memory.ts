// Imports and exports an XLSX workbook of 1,000,000 cells (100,000 rows x 10 columns by
// default) through @forge/import-export/xlsx and prints each side's peak RSS and rate. From
// bench/ (where tsx and exceljs are installed):
//   npx tsx import-export/xlsx-memory.ts [rows] [--json results/xlsx-memory.json]
// Each measure runs in a child process of its own, so its peak RSS is its own. The workbook
// is written twice: with shared strings (as Excel writes them: the reader caches the
// table) and with inline strings (as the exporter writes them).
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ExcelJS from "exceljs";
import { createExportHandler, createImportHandler, exportPayload, importPayload, type ImportProgress } from "../../packages/import-export/src/index.js";
import { xlsxFormat } from "../../packages/import-export/src/xlsx.js";
import { inChild, mb } from "./child.js";

const COLUMNS = ["id", "name", "email", "city", "amount", "joined", "team", "phone", "score", "note"];

function row(i: number): unknown[] {
  return [
    i,
    `Person ${i}`,
    `person${i}@example.com`,
    "Zürich",
    (i % 9973) / 100,
    new Date(Date.UTC(2026, 0, 1 + (i % 365))),
    `team ${i % 50}`,
    `+41 44 ${String(i).padStart(7, "0")}`,
    i % 100,
    `note ${i}`,
  ];
}

async function generate(file: string, rows: number, useSharedStrings: boolean): Promise<void> {
  const book = new ExcelJS.stream.xlsx.WorkbookWriter({ filename: file, useSharedStrings, useStyles: true });
  const sheet = book.addWorksheet("Data");
  sheet.addRow(COLUMNS).commit();
  for (let i = 1; i <= rows; i++) sheet.addRow(row(i)).commit();
  sheet.commit();
  await book.commit();
}

async function importOnly(dir: string, file: string): Promise<void> {
  const rssByTenth: number[] = [];
  const handler = createImportHandler({
    importers: { noop: { validate: (r) => ({ ok: true, value: r }), writeBatch: async () => undefined } },
    baseDir: dir,
    formats: [xlsxFormat()],
  });
  const started = performance.now();
  const report = await handler(importPayload({ importer: "noop", file }), {
    checkpoint: async (progress: unknown, work?: (tx: unknown) => Promise<unknown>) => {
      await work?.(undefined);
      const { bytes, totalBytes } = progress as ImportProgress;
      if (bytes >= ((rssByTenth.length + 1) * totalBytes) / 10) rssByTenth.push(mb(process.memoryUsage.rss()));
      return true;
    },
  });
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(JSON.stringify({ rows: report.imported, seconds, peakRssMb: mb(process.resourceUsage().maxRSS * 1024), rssByTenth }));
}

async function exportOnly(dir: string, rows: number): Promise<void> {
  const rssByTenth: number[] = [];
  const handler = createExportHandler({
    exporters: {
      big: {
        columns: COLUMNS,
        rows: function* () {
          for (let i = 1; i <= rows; i++) {
            if (i % Math.ceil(rows / 10) === 0) rssByTenth.push(mb(process.memoryUsage.rss()));
            yield Object.fromEntries(COLUMNS.map((c, j) => [c, row(i)[j]]));
          }
        },
      },
    },
    baseDir: dir,
    formats: [xlsxFormat()],
  });
  const started = performance.now();
  const result = await handler(exportPayload({ exporter: "big", file: "export.xlsx" }));
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(JSON.stringify({ rows: result.rows, seconds, peakRssMb: mb(process.resourceUsage().maxRSS * 1024), rssByTenth }));
}

function child(args: string[]): Promise<{ rows: number; seconds: number; peakRssMb: number; rssByTenth: number[] }> {
  return inChild(fileURLToPath(import.meta.url), args);
}

interface Measure {
  measure: string;
  cells: number;
  fileMb?: number;
  seconds: number;
  cellsPerSecond: number;
  peakRssMb: number;
  rssByTenthMb: number[];
}

async function main(rows: number, jsonFile: string | undefined): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "forge-xlsx-bench-"));
  const measures: Measure[] = [];
  const loadBefore = os.loadavg();
  try {
    for (const shared of [true, false]) {
      const file = shared ? "shared.xlsx" : "inline.xlsx";
      await generate(path.join(dir, file), rows, shared);
      const { size } = await stat(path.join(dir, file));
      const m = await child(["--import-only", dir, file]);
      const cells = m.rows * COLUMNS.length;
      measures.push({
        measure: `import, ${shared ? "shared" : "inline"} strings`,
        cells,
        fileMb: mb(size),
        seconds: Math.round(m.seconds * 10) / 10,
        cellsPerSecond: Math.round(cells / m.seconds),
        peakRssMb: m.peakRssMb,
        rssByTenthMb: m.rssByTenth,
      });
      console.log(
        `import ${file}: cells=${cells} file=${mb(size)}MB time=${m.seconds.toFixed(1)}s rate=${Math.round(cells / m.seconds)} cells/s peakRSS=${m.peakRssMb}MB rssByTenth=[${m.rssByTenth.join(",")}]`,
      );
    }
    const e = await child(["--export-only", dir, String(rows)]);
    const cells = e.rows * COLUMNS.length;
    measures.push({
      measure: "export",
      cells,
      seconds: Math.round(e.seconds * 10) / 10,
      cellsPerSecond: Math.round(cells / e.seconds),
      peakRssMb: e.peakRssMb,
      rssByTenthMb: e.rssByTenth,
    });
    console.log(
      `export: cells=${cells} time=${e.seconds.toFixed(1)}s rate=${Math.round(cells / e.seconds)} cells/s peakRSS=${e.peakRssMb}MB rssByTenth=[${e.rssByTenth.join(",")}] (node ${process.version})`,
    );
    if (jsonFile) {
      const machine = {
        node: process.version,
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model ?? "",
        memoryGb: Math.round(os.totalmem() / 1024 ** 3),
        loadAverageBefore: loadBefore.map((l) => Math.round(l * 100) / 100),
        loadAverageAfter: os.loadavg().map((l) => Math.round(l * 100) / 100),
      };
      const result = {
        date: new Date().toISOString(),
        command: `cd bench && npx tsx import-export/xlsx-memory.ts ${rows} --json ${jsonFile}`,
        rows,
        columns: COLUMNS.length,
        machine,
        measures,
      };
      await writeFile(jsonFile, `${JSON.stringify(result, null, 2)}\n`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--import-only") await importOnly(process.argv[3]!, process.argv[4]!);
else if (process.argv[2] === "--export-only") await exportOnly(process.argv[3]!, Number(process.argv[4]));
else {
  const args = process.argv.slice(2);
  const json = args.indexOf("--json");
  const jsonFile = json === -1 ? undefined : args.splice(json, 2)[1];
  await main(Number(args[0] ?? 100_000), jsonFile);
}
