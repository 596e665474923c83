import { html, type Html } from "./escape.js";
import { formatDuration, type WaitTimes } from "../flow/wait-times.js";
import { CHART_MINUTES, type Throughput } from "./queries.js";

// Inline SVG, drawn on the server: no script, no external asset, nothing for the CSP to allow.
const DONE_FILL = "#2e7d32";
const FAILED_FILL = "#c62828";
const SLOT = 6;
const BAR = 5;
const LEFT = 44;
const TOP = 8;
const PLOT_HEIGHT = 80;
const BOTTOM = TOP + PLOT_HEIGHT;
const WIDTH = LEFT + CHART_MINUTES * SLOT + 8;
const HEIGHT = BOTTOM + 16;

/** "14:07 UTC" for a minute since the epoch. */
function minuteLabel(minute: number): string {
  return `${new Date(minute * 60_000).toISOString().slice(11, 16)} UTC`;
}

function swatch(fill: string): Html {
  return html`<svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="${fill}"/></svg>`;
}

/** The key shared by every chart on the page. */
export function chartLegend(): Html {
  return html`<p class="legend">${swatch(DONE_FILL)} done ${swatch(FAILED_FILL)} failed <span class="zero">· jobs that ended per minute, by the database clock</span></p>`;
}

/**
 * One queue's last CHART_MINUTES minutes: a stacked bar per minute (done below, failed above),
 * each with a `<title>` carrying its exact counts; the last slot is the database's `nowMinute`.
 */
export function throughputChart(queue: string, series: Throughput | undefined, nowMinute: number): Html {
  const done = series?.done ?? [];
  const failed = series?.failed ?? [];
  const totals = Array.from({ length: CHART_MINUTES }, (_, i) => (done[i] ?? 0) + (failed[i] ?? 0));
  const max = Math.max(0, ...totals);
  const sum = (list: number[]) => list.reduce((a, b) => a + b, 0);
  // At least a pixel for any non-zero count, so a single job among hundreds still shows.
  const height = (n: number) => (n === 0 ? 0 : Math.max(1, Math.round((n / max) * PLOT_HEIGHT * 10) / 10));
  const bars = totals.flatMap((total, i) => {
    if (total === 0) return [];
    const d = done[i] ?? 0;
    const f = failed[i] ?? 0;
    const ago = CHART_MINUTES - 1 - i;
    const minute = nowMinute - ago;
    const x = LEFT + i * SLOT;
    const dh = height(d);
    const fh = height(f);
    return [
      html`<g class="bar" data-minute="${minute}" data-ago="${ago}" data-done="${d}" data-failed="${f}"><title>${minuteLabel(minute)}: ${d} done, ${f} failed</title>${
        d ? html`<rect class="done" x="${x}" y="${BOTTOM - dh}" width="${BAR}" height="${dh}" fill="${DONE_FILL}"/>` : ""
      }${f ? html`<rect class="failed" x="${x}" y="${BOTTOM - dh - fh}" width="${BAR}" height="${fh}" fill="${FAILED_FILL}"/>` : ""}</g>`,
    ];
  });
  return html`<svg class="chart" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img"><title>${queue}: ${sum(done)} done, ${sum(failed)} failed in the last ${CHART_MINUTES} minutes</title>
<line x1="${LEFT}" y1="${TOP}" x2="${WIDTH - 8}" y2="${TOP}" stroke="#e6e8ec"/><line x1="${LEFT}" y1="${BOTTOM}" x2="${WIDTH - 8}" y2="${BOTTOM}" stroke="#8a93a3"/>
<text x="${LEFT - 4}" y="${TOP + 4}" text-anchor="end" data-axis="max">${max}/min</text><text x="${LEFT - 4}" y="${BOTTOM}" text-anchor="end">0</text>
<text x="${LEFT}" y="${HEIGHT - 3}">${CHART_MINUTES} min ago</text><text x="${WIDTH - 8}" y="${HEIGHT - 3}" text-anchor="end">now</text>
${bars}</svg>`;
}

/** The wait-time cells of a queue's row: p50 and p95, with the sample size in their tooltip. */
export function waitCells(wait: WaitTimes | undefined): Html {
  const note = wait
    ? `over the latest ${wait.sample} jobs started in the last ${CHART_MINUTES} minutes`
    : `no job started in the last ${CHART_MINUTES} minutes`;
  const cell = (name: "p50" | "p95") =>
    wait
      ? html`<td class="n" data-wait="${name}" data-ms="${Math.round(wait[name])}" title="${note}">${formatDuration(wait[name])}</td>`
      : html`<td class="n zero" data-wait="${name}" title="${note}">${formatDuration(null)}</td>`;
  return html`${cell("p50")}${cell("p95")}`;
}
