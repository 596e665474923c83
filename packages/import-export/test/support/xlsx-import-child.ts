// Imports one workbook in its own process, so that a test can bound its heap
// (node --max-old-space-size) and survive a worker that dies of it. Prints one JSON line:
// { report } or { error: { message, retryable } }, with the process's resident memory
// before the import and at its peak (sampled every 10 ms), in MB.
import { createImportHandler, importPayload, type Importer } from "../../src/index.js";
import { xlsxFormat } from "../../src/xlsx.js";

const { BASE_DIR, FILE, XLSX_OPTIONS } = process.env;
if (!BASE_DIR || !FILE) throw new Error("BASE_DIR and FILE are required");

const mb = (bytes: number): number => Math.round(bytes / 1e5) / 10;
const before = process.memoryUsage.rss();
let peak = before;
const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);

let rows = 0;
const importer: Importer<Record<string, string>> = {
  validate: (row) => ({ ok: true, value: row }),
  writeBatch: async (values) => void (rows += values.length),
};
const format = XLSX_OPTIONS ? xlsxFormat(JSON.parse(XLSX_OPTIONS) as Parameters<typeof xlsxFormat>[0]) : xlsxFormat();
const handler = createImportHandler({ importers: { sheet: importer }, baseDir: BASE_DIR, formats: [format] });
let outcome: Record<string, unknown>;
try {
  outcome = { report: await handler(importPayload({ importer: "sheet", file: FILE })), rows };
} catch (error) {
  const { message, retryable } = error as Error & { retryable?: unknown };
  outcome = { error: { message, retryable } };
}
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage.rss());
process.stdout.write(`${JSON.stringify({ ...outcome, rssBeforeMB: mb(before), rssPeakMB: mb(peak) })}\n`);
