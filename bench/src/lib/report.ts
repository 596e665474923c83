import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { median } from "./stats.js";

export interface Row {
  /** Stable key within the table, e.g. "forge", "graphile:tuned". */
  system: string;
  label: string;
  config: string;
  /** Column → samples (one per round). The printed value is the median. */
  samples: Record<string, number[]>;
  note?: string;
  /** The first column's value in the run this one is compared with (set when published). */
  previous?: { value: number; date: string };
}

export interface Table {
  id: string;
  title: string;
  unit: string;
  better: "higher" | "lower";
  /** Value columns; the first is the one ratios and deltas are computed on. */
  columns: string[];
  /** Cost columns printed after the ratio (medians, no ratio). */
  costColumns?: string[];
  /** The row every other row is compared with (ours). */
  ref: string;
  rows: Row[];
  notes: string[];
  /** When this table was measured (the run's start). */
  measuredAt?: string;
}

export interface Results {
  meta: Record<string, unknown>;
  tables: Table[];
  skipped: { measure: string; reason: string }[];
  profile?: unknown;
}

export function value(row: Row, column: string): number {
  return median(row.samples[column] ?? []);
}

function fmt(n: number): string {
  if (!Number.isFinite(n)) return "–";
  const abs = Math.abs(n);
  if (abs >= 1000) return Math.round(n).toLocaleString("en-US");
  if (abs >= 100) return n.toFixed(0);
  if (abs >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

function ratio(table: Table, row: Row): string {
  const ref = table.rows.find((r) => r.system === table.ref);
  if (!ref) return "–";
  const col = table.columns[0] as string;
  const a = value(row, col);
  const b = value(ref, col);
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return "–";
  return `${(a / b).toFixed(2)}×`;
}

/** Records, on each row, the value of the same measure in the previous results (if any). */
export function attachPrevious(table: Table, previous: Results | null): void {
  const prevTable = previous?.tables.find((t) => t.id === table.id);
  if (!prevTable || prevTable.measuredAt === table.measuredAt) return;
  const col = table.columns[0] as string;
  for (const row of table.rows) {
    const prevRow = prevTable.rows.find((r) => r.system === row.system);
    if (prevRow) row.previous = { value: value(prevRow, col), date: String(prevTable.measuredAt ?? previous?.meta.date ?? "?") };
  }
}

function delta(table: Table, row: Row): string {
  if (!row.previous) return "new";
  const col = table.columns[0] as string;
  const before = row.previous.value;
  const now = value(row, col);
  if (!Number.isFinite(before) || !Number.isFinite(now) || before === 0) return "–";
  const pct = ((now - before) / before) * 100;
  return `${pct >= 0 ? "+" : ""}${pct.toFixed(1)}%`;
}

function rangeOf(row: Row, col: string): string {
  const s = row.samples[col] ?? [];
  if (s.length < 2) return "";
  return `${fmt(Math.min(...s))}–${fmt(Math.max(...s))}`;
}

function cells(table: Table): { head: string[]; body: string[][] } {
  const head = [
    "system",
    ...table.columns.map((c) => (c === table.unit ? c : `${c} (${table.unit})`)),
    "range",
    "÷ ours",
    ...(table.costColumns ?? []),
    "Δ prev",
  ];
  const body = table.rows.map((row) => [
    row.label + (row.note ? ` [${row.note}]` : ""),
    ...table.columns.map((c) => fmt(value(row, c))),
    rangeOf(row, table.columns[0] as string),
    ratio(table, row),
    ...(table.costColumns ?? []).map((c) => fmt(value(row, c))),
    delta(table, row),
  ]);
  return { head, body };
}

export function printTable(table: Table): void {
  const { head, body } = cells(table);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  console.log(`\n== ${table.title} (${table.better} is better) ==`);
  console.log(line(head));
  for (const r of body) console.log(line(r));
  for (const n of table.notes) console.log(`   ${n}`);
}

export function markdownTable(table: Table): string {
  const { head, body } = cells(table);
  const out = [
    `### ${table.title}`,
    "",
    `${table.better === "higher" ? "Higher" : "Lower"} is better; median of the rounds, range = min–max; ÷ ours = this row's value divided by ours.`,
    "",
  ];
  out.push(`| ${head.join(" | ")} |`, `|${head.map((_, i) => (i === 0 ? " --- " : " ---: ")).join("|")}|`);
  for (const r of body) out.push(`| ${r.join(" | ")} |`);
  out.push("", "| system | configuration |", "| --- | --- |");
  for (const row of table.rows) out.push(`| ${row.label} | ${row.config.replace(/\|/g, "\\|")} |`);
  for (const n of table.notes) out.push("", n);
  return out.join("\n");
}

export function loadResults(path: string): Results | null {
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Results;
  } catch {
    return null;
  }
}

export function saveResults(path: string, results: Results): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify(results, null, 2) + "\n");
}
