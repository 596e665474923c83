import type { JobsDatabase } from "../core/database.js";
import { isMissingTable } from "../flow/flow-overview.js";
import { listSchedules, pauseSchedule, readSchedule, resumeSchedule, triggerSchedule, type ScheduleStatus } from "../schedules/schedules.js";
import { html, type Html } from "./escape.js";
import type { Notice } from "./notices.js";

// The schedules panel: listSchedules with pause / resume / run-now forms. Nothing at all on a
// schema older than schedules (`schedules` null).

/** Every schedule, or null when the schema has no schedules table yet. */
export async function schedulesOverview(db: JobsDatabase): Promise<ScheduleStatus[] | null> {
  try {
    return await listSchedules({ db });
  } catch (error) {
    if (isMissingTable(error)) return null;
    throw error;
  }
}

/** A schedule's pause, resume or run-now; the notice and, for a run, its job id. */
export async function actOnSchedule(db: JobsDatabase, name: string, verb: string): Promise<[Notice, number]> {
  if (verb === "trigger") {
    if ((await readSchedule(db, name)) === null) return ["schedule-missing", 0];
    return ["schedule-triggered", await triggerSchedule(name, { db })];
  }
  const done = verb === "pause" ? await pauseSchedule(name, { db }) : await resumeSchedule(name, { db });
  return [done ? (verb === "pause" ? "schedule-paused" : "schedule-resumed") : "schedule-missing", 0];
}

export interface ScheduleForms {
  basePath: string;
  csrfToken: string;
}

function when(date: Date | null): Html {
  return date === null
    ? html`<span class="zero">—</span>`
    : html`<time datetime="${date.toISOString()}">${date.toISOString().slice(0, 16).replace("T", " ")} UTC</time>`;
}

function form(forms: ScheduleForms, s: ScheduleStatus, verb: "pause" | "resume" | "trigger", label: string): Html {
  return html`<form method="post" action="${forms.basePath}/schedules/${encodeURIComponent(s.name)}/${verb}"><input type="hidden" name="csrf" value="${forms.csrfToken}"><button type="submit" data-action="${verb}" data-schedule="${s.name}">${label}</button></form>`;
}

export function schedulesSection(schedules: ScheduleStatus[] | null, forms: ScheduleForms): Html {
  if (schedules === null) return html``;
  const body =
    schedules.length === 0
      ? html`<p class="empty">No schedules (schedule(), or syncSchedules() at start-up).</p>`
      : html`<table><thead><tr><th>Name</th><th>Cron</th><th>Time zone</th><th>Task</th><th>Queue</th><th>Next run</th><th>Last run</th><th>State</th><th></th></tr></thead><tbody>${schedules.map(
          (s) =>
            html`<tr data-schedule="${s.name}" data-paused="${s.paused ? "true" : "false"}"><td>${s.name}</td><td><code>${s.cron}</code></td><td>${s.timezone}</td><td>${s.task}</td><td>${s.queue}</td><td data-next>${s.paused ? html`<span class="zero">—</span>` : when(s.nextRunAt)}</td><td data-last>${when(s.lastRunAt)}</td><td>${s.paused ? "paused" : "active"}</td><td>${s.paused ? form(forms, s, "resume", "Resume") : form(forms, s, "pause", "Pause")}${form(forms, s, "trigger", "Run now")}</td></tr>`,
        )}</tbody></table>`;
  return html`<section id="schedules"><h2>Schedules</h2>${body}</section>`;
}
