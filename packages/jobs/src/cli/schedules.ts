import { listSchedules, pauseSchedule, resumeSchedule, triggerSchedule, type ScheduleStatus } from "../schedules/schedules.js";
import { openDatabase, type Io, type Parsed } from "./commands.js";
import { renderTable } from "./table.js";
import { ProblemsFound, UsageError } from "./usage.js";

/** Minutes precision in UTC: what an operator compares with the cron expression and zone beside it. */
function when(date: Date | null): string {
  return date === null ? "-" : `${date.toISOString().slice(0, 16).replace("T", " ")}Z`;
}

export function renderSchedules(schedules: ScheduleStatus[]): string {
  return renderTable(
    ["NAME", "CRON", "TIMEZONE", "TASK", "QUEUE", "NEXT_RUN", "LAST_RUN", "STATE"],
    schedules.map((s) => [s.name, s.cron, s.timezone, s.task, s.queue, s.paused ? "-" : when(s.nextRunAt), when(s.lastRunAt), s.paused ? "paused" : "active"]),
  );
}

/** `forge-jobs schedules [list|pause|resume|trigger]`. */
export async function schedulesCommand(p: Parsed, io: Io): Promise<void> {
  const [action = "list", ...args] = p.positionals;
  const usage = { list: "schedules list", pause: "schedules pause <name>", resume: "schedules resume <name>", trigger: "schedules trigger <name>" };
  if (!(action in usage)) throw new UsageError(`unknown action ${JSON.stringify(action)}: use schedules list, pause <name>, resume <name> or trigger <name>`);
  const expected = action === "list" ? 0 : 1;
  if (args.length !== expected) {
    throw new UsageError(
      `usage: forge-jobs ${usage[action as keyof typeof usage]}${args.length > expected ? ` (unexpected ${JSON.stringify(args[expected])})` : ""}`,
    );
  }
  const db = openDatabase(p, { reading: action === "list" });
  try {
    if (action === "list") {
      const schedules = await listSchedules({ db });
      io.out(p.values.json ? JSON.stringify(schedules, null, 2) + "\n" : schedules.length ? renderSchedules(schedules) : "no schedules\n");
      return;
    }
    const name = args[0]!;
    const missing = () => new ProblemsFound(`no schedule named ${name}; forge-jobs schedules list shows them`);
    if (action === "pause") {
      if (!(await pauseSchedule(name, { db }))) throw missing();
      io.out(`paused ${name}; its pending runs are cancelled\n`);
    } else if (action === "resume") {
      if (!(await resumeSchedule(name, { db }))) throw missing();
      const next = (await listSchedules({ db })).find((s) => s.name === name)?.nextRunAt ?? null;
      io.out(`resumed ${name}; next run ${when(next)}\n`);
    } else {
      const id = await triggerSchedule(name, { db }).catch((error: unknown) => {
        if (error instanceof Error && /no schedule named/.test(error.message)) throw missing();
        throw error;
      });
      io.out(`enqueued job ${id} for ${name}\n`);
    }
  } finally {
    await db.close();
  }
}
