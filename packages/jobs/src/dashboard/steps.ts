import type { JobSteps, JobWaitingFor } from "../reads/steps.js";
import { html, type Html } from "./escape.js";
import { when } from "./stamps.js";

/** Bytes as the job page shows a saved result's size. */
function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  return bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * A job's durable steps (`ctx.step`, `ctx.sleep`) on its page, in save order, and what it waits
 * for now; nothing for a job that saved none (most jobs). The results themselves stay in the
 * database: their size says enough, and one may be large.
 */
export function stepsSection(steps: JobSteps | null): Html {
  if (steps === null || (steps.steps.length === 0 && steps.waitingFor === null)) return html``;
  const rows = steps.steps.map(
    (s) =>
      html`<tr data-step="${s.name}" data-status="${s.status}"><td><code>${s.name}</code></td><td>${s.kind}</td><td>${s.status}</td><td class="n">${s.attempt}</td><td class="n">${
        s.durationMs === null ? "—" : `${s.durationMs} ms`
      }</td><td class="n">${s.kind === "sleep" ? "—" : size(s.resultBytes)}</td><td>${s.wakeAt === null ? "—" : when(s.wakeAt)}</td><td>${when(s.savedAt)}</td></tr>`,
  );
  const waiting = steps.waitingFor ? waitingFor(steps.waitingFor) : "";
  return html`<section id="steps"><h2>Steps</h2>${waiting}<table><thead><tr><th>Name</th><th>Kind</th><th>Status</th><th class="n">Attempt</th><th class="n">Duration</th><th class="n">Result</th><th>Wakes</th><th>Saved</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

/** What the job waits for now, in a sentence: a sleep's wake time, an event and its timeout, a child job. */
function waitingFor(w: JobWaitingFor): Html {
  if (w.kind === "sleep") return html`<p data-waiting-for="${w.step}">Sleeping (step <code>${w.step}</code>) until ${when(w.until)}.</p>`;
  if (w.kind === "child") {
    return html`<p data-waiting-for="${w.step}">Waiting (step <code>${w.step}</code>) for child job <a href="${String(w.childId)}">#${String(w.childId)}</a>.</p>`;
  }
  const until = w.until === null ? html`` : html` until ${when(w.until)}`;
  return html`<p data-waiting-for="${w.step}">Waiting (step <code>${w.step}</code>) for event <code>${w.event}</code> of key <code>${w.key}</code>${until}.</p>`;
}
