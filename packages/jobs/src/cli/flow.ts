import { removeLimit, setLimit, listLimits, describeLimit, type LimitSettings } from "../flow/limits.js";
import { listGroups, setGroupWeight } from "../flow/groups.js";
import { openDatabase, type Io, type Parsed } from "./commands.js";
import { renderGroups, renderLimits } from "./flow-tables.js";
import { ProblemsFound, UsageError, parseDuration, parseNumber } from "./usage.js";

/** `forge-jobs limits [list|set|rm]`. */
export async function limitsCommand(p: Parsed, io: Io): Promise<void> {
  const [action = "list", ...args] = p.positionals;
  if (action === "list") {
    expectArgs(args, 0, "limits list");
    const db = openDatabase(p, { reading: true });
    try {
      const limits = await listLimits({ db });
      io.out(p.values.json ? JSON.stringify(limits, null, 2) + "\n" : limits.length ? renderLimits(limits) : "no limits set\n");
    } finally {
      await db.close();
    }
    return;
  }
  if (action === "set") {
    expectArgs(args, 1, "limits set <key>");
    const key = args[0]!;
    const limit = limitFromFlags(p);
    const db = openDatabase(p);
    try {
      await setLimit(key, limit, { db });
      const stored = (await listLimits({ db })).find((l) => l.key === key);
      io.out(`limit ${key}: ${stored ? describeLimit(stored) : "stored"}\n`);
    } finally {
      await db.close();
    }
    return;
  }
  if (action === "rm") {
    expectArgs(args, 1, "limits rm <key>");
    const db = openDatabase(p);
    try {
      if (!(await removeLimit(args[0]!, { db }))) throw new ProblemsFound(`no limit stored for ${args[0]}; nothing removed`);
      io.out(`removed the limit of ${args[0]}\n`);
    } finally {
      await db.close();
    }
    return;
  }
  throw new UsageError(`unknown action ${JSON.stringify(action)}: use limits list, limits set <key> or limits rm <key>`);
}

/** `forge-jobs groups [list|weight]`. */
export async function groupsCommand(p: Parsed, io: Io): Promise<void> {
  const [action = "list", ...args] = p.positionals;
  if (action === "list") {
    expectArgs(args, 0, "groups list");
    const db = openDatabase(p, { reading: true });
    try {
      const groups = await listGroups({ db });
      io.out(p.values.json ? JSON.stringify(groups, null, 2) + "\n" : groups.length ? renderGroups(groups) : "no groups\n");
    } finally {
      await db.close();
    }
    return;
  }
  if (action === "weight") {
    expectArgs(args, 2, "groups weight <group> <n>");
    const weight = parseNumber(args[1], "the weight", true)!;
    const db = openDatabase(p);
    try {
      await setGroupWeight(args[0]!, weight, { db });
      io.out(`group ${args[0]}: weight ${weight}${weight === 1 ? " (the default)" : ""}\n`);
    } finally {
      await db.close();
    }
    return;
  }
  throw new UsageError(`unknown action ${JSON.stringify(action)}: use groups list or groups weight <group> <n>`);
}

function expectArgs(args: string[], count: number, usage: string): void {
  if (args.length !== count) throw new UsageError(`usage: forge-jobs ${usage}${args.length > count ? ` (unexpected ${JSON.stringify(args[count])})` : ""}`);
}

function limitFromFlags(p: Parsed): LimitSettings {
  const concurrency = parseNumber(p.values.concurrency as string | undefined, "--concurrency", true);
  const rateText = p.values.rate as string | undefined;
  const burst = parseNumber(p.values.burst as string | undefined, "--burst", true);
  if (burst !== undefined && rateText === undefined) throw new UsageError("--burst goes with --rate, e.g. --rate 14/1s --burst 28");
  if (concurrency === undefined && rateText === undefined) throw new UsageError("limits set needs --concurrency <n>, --rate <n>/<duration> or both");
  const rate = rateText === undefined ? undefined : { ...parseRate(rateText), ...(burst === undefined ? {} : { burst }) };
  return { ...(concurrency === undefined ? {} : { concurrency }), ...(rate === undefined ? {} : { rate }) };
}

/** "14/1", "14/1s", "600/1m", "100/h" → 14 per 1 s, 600 per 60 s, 100 per 3600 s. */
export function parseRate(text: string): { limit: number; perSeconds: number } {
  const match = /^(\d+)\/(.+)$/.exec(text.trim());
  const per = match ? match[2]!.trim() : "";
  if (!match || per === "") throw new UsageError(`--rate must be <jobs>/<duration>, e.g. 14/1s, 600/1m or 100/h, got ${JSON.stringify(text)}`);
  return { limit: Number(match[1]), perSeconds: parseDuration(/^[smhdw]$/.test(per) ? `1${per}` : per, "--rate's duration") };
}
