import { html, type Html } from "./escape.js";

/** A timestamp as the pages show it (UTC, to the millisecond), or a dash. */
export function when(date: Date | null): Html {
  return date === null
    ? html`<span class="zero">—</span>`
    : html`<time datetime="${date.toISOString()}">${date.toISOString().replace("T", " ").slice(0, 23)} UTC</time>`;
}

/**
 * What a running job of a lost worker (silent past its lease, reads/workers.ts) shows instead of
 * "running": when the sweep takes it back, its lease's end.
 */
export function lostWorkerNote(lockedUntil: Date | null): Html {
  return html`<span class="bad" data-lost="true">worker lost, will be reclaimed at ${when(lockedUntil)}</span>`;
}
