import { mkdirSync, writeFileSync } from "node:fs";
import { value, type Results, type Table } from "./lib/report.js";

/**
 * SVG charts of the results, written next to BENCHMARKS.md (bench/charts/) by every run
 * that writes the tables: one per table (median bars, a whisker from the slowest to the
 * fastest round) and an overview of processing by system and concurrency. Plain SVG text:
 * no dependency, readable on GitHub and in any browser.
 */

const COLORS = ["#2f6fdf", "#e07b39", "#3a9d5d", "#9b59b6", "#c0392b", "#7f8c8d", "#16a085"];
const OURS = "#2f6fdf";
const OTHERS = "#9aa5b1";

function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function fmt(n: number): string {
  if (!Number.isFinite(n)) return "–";
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString("en-US");
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

interface Bar {
  label: string;
  series: { name: string; median: number; min: number; max: number; color: string }[];
}

/** Horizontal bars, one group per row of the table: a reader sees who leads at a glance. */
function barsSvg(title: string, unit: string, better: "higher" | "lower", bars: Bar[], legend: string[]): string {
  const labelWidth = 290;
  const plotWidth = 460;
  const barHeight = 14;
  const seriesCount = Math.max(1, ...bars.map((b) => b.series.length));
  const groupHeight = seriesCount * (barHeight + 2) + 10;
  const top = legend.length > 1 ? 52 : 36;
  const height = top + bars.length * groupHeight + 24;
  // Scaled on the medians: one slow round must not flatten every bar. Whiskers past the edge are cut.
  const max = 1.2 * Math.max(1e-9, ...bars.flatMap((b) => b.series.map((s) => s.median)).filter(Number.isFinite));
  const x = (v: number) => labelWidth + (Math.min(Math.max(0, v), max) / max) * plotWidth;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + plotWidth + 90}" height="${height}" font-family="system-ui, sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="8" y="18" font-size="13" font-weight="600">${esc(title)}</text>`,
    `<text x="8" y="31" fill="#555">${esc(unit)} (${better} is better); bar = median of the rounds, line = slowest to fastest round (» past the edge)</text>`,
  ];
  if (legend.length > 1) {
    legend.forEach((name, i) => {
      const lx = 8 + i * 110;
      out.push(`<rect x="${lx}" y="38" width="10" height="10" fill="${COLORS[i % COLORS.length]}"/><text x="${lx + 14}" y="47">${esc(name)}</text>`);
    });
  }
  bars.forEach((bar, g) => {
    const y0 = top + g * groupHeight;
    out.push(`<text x="${labelWidth - 6}" y="${y0 + (seriesCount * (barHeight + 2)) / 2 + 4}" text-anchor="end">${esc(bar.label)}</text>`);
    bar.series.forEach((s, i) => {
      const y = y0 + i * (barHeight + 2);
      if (!Number.isFinite(s.median)) return;
      out.push(
        `<rect x="${labelWidth}" y="${y}" width="${(x(s.median) - labelWidth).toFixed(1)}" height="${barHeight}" fill="${s.color}"><title>${esc(`${bar.label} ${s.name}: ${fmt(s.median)} ${unit}`)}</title></rect>`,
      );
      if (Number.isFinite(s.min) && Number.isFinite(s.max) && s.max > s.min) {
        const my = y + barHeight / 2;
        out.push(`<line x1="${x(s.min).toFixed(1)}" x2="${x(s.max).toFixed(1)}" y1="${my}" y2="${my}" stroke="#222" stroke-width="1"/>`);
      }
      // The value sits on the bar's end; a whisker cut at the edge ends in a chevron.
      if (Number.isFinite(s.max) && s.max > max) out.push(`<text x="${labelWidth + plotWidth + 2}" y="${y + barHeight - 3}">»</text>`);
      out.push(
        `<text x="${(x(s.median) + 4).toFixed(1)}" y="${y + barHeight - 3}" paint-order="stroke" stroke="#fff" stroke-width="3">${fmt(s.median)}</text>`,
      );
    });
  });
  out.push(`<line x1="${labelWidth}" x2="${labelWidth}" y1="${top - 4}" y2="${height - 20}" stroke="#888"/>`, "</svg>");
  return out.join("\n") + "\n";
}

function stats(samples: number[] | undefined): { min: number; max: number } {
  const finite = (samples ?? []).filter(Number.isFinite);
  return finite.length ? { min: Math.min(...finite), max: Math.max(...finite) } : { min: NaN, max: NaN };
}

/** One chart per table: a bar per row, and per column when the table has several (percentiles). */
export function tableSvg(table: Table): string {
  const several = table.columns.length > 1;
  const bars: Bar[] = table.rows.map((row) => ({
    label: row.label,
    series: table.columns.map((column, i) => ({
      name: column,
      median: value(row, column),
      ...stats(row.samples[column]),
      color: several ? COLORS[i % COLORS.length]! : row.system === table.ref ? OURS : OTHERS,
    })),
  }));
  return barsSvg(table.title, table.unit, table.better, bars, several ? table.columns : []);
}

/** Processing throughput by system, at each concurrency measured: the lead at a glance. */
export function overviewSvg(results: Results): string | undefined {
  const tables = ["processing-c1", "processing-c10", "processing-c50"]
    .map((id) => results.tables.find((t) => t.id === id))
    .filter((t): t is Table => t !== undefined);
  if (tables.length === 0) return undefined;
  const systems = [...new Map(tables.flatMap((t) => t.rows.map((r) => [r.system, r.label] as const))).entries()];
  const bars: Bar[] = systems.map(([system, label]) => ({
    label,
    series: tables.map((t, i) => {
      const row = t.rows.find((r) => r.system === system);
      const column = t.columns[0]!;
      return {
        name: t.id.replace("processing-", "concurrency "),
        median: row ? value(row, column) : NaN,
        ...stats(row?.samples[column]),
        color: COLORS[i % COLORS.length]!,
      };
    }),
  }));
  return barsSvg(
    "PostgreSQL: processing no-op jobs, by system and concurrency",
    "jobs/s",
    "higher",
    bars,
    tables.map((t) => t.id.replace("processing-", "concurrency ")),
  );
}

/** Writes every chart under `dir`; returns table id → file name (relative to dir). */
export function writeCharts(dir: string, results: Results): Map<string, string> {
  mkdirSync(dir, { recursive: true });
  const written = new Map<string, string>();
  const overview = overviewSvg(results);
  if (overview) {
    writeFileSync(`${dir}/overview.svg`, overview);
    written.set("overview", "overview.svg");
  }
  for (const table of results.tables) {
    writeFileSync(`${dir}/${table.id}.svg`, tableSvg(table));
    written.set(table.id, `${table.id}.svg`);
  }
  return written;
}
