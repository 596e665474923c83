import { parseArgs } from "node:util";
import { JobError } from "../base/errors.js";
import { doctor, init, runMigrate, runPrune, runReclaim, runWorkerCommand, status, type Io, type Parsed } from "./commands.js";
import { groupsCommand, limitsCommand } from "./flow.js";
import { schedulesCommand } from "./schedules.js";
import { queuesCommand } from "./queues.js";
import { cancelCommand, listCommand, retryCommand, showCommand } from "./jobs.js";
import { historyCommand } from "./history.js";
import { upgradeCommand } from "./upgrade.js";
import { HELP, ProblemsFound, UsageError } from "./usage.js";
import { packageVersion } from "./version.js";
import { databaseUrlFromEnvFile } from "./env-file.js";

const COMMON = {
  "database-url": { type: "string" },
  schema: { type: "string" },
  "read-url": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** The job filters of list, retry and cancel. */
const FILTERS = {
  queue: { type: "string", multiple: true },
  status: { type: "string" },
  task: { type: "string" },
  tenant: { type: "string" },
  "older-than": { type: "string" },
} as const;

const COMMANDS = {
  init: { run: init, options: { dir: { type: "string" }, dialect: { type: "string" } } },
  migrate: { run: runMigrate, options: {} },
  status: { run: status, options: { queue: { type: "string", multiple: true }, json: { type: "boolean" }, watch: { type: "string" } } },
  reclaim: { run: runReclaim, options: { lease: { type: "string" }, queue: { type: "string", multiple: true } } },
  worker: {
    run: runWorkerCommand,
    options: {
      queue: { type: "string", multiple: true },
      concurrency: { type: "string" },
      lease: { type: "string" },
      grace: { type: "string" },
      poll: { type: "string" },
      "no-schedules": { type: "boolean" },
      "listen-url": { type: "string" },
    },
  },
  doctor: { run: doctor, options: { handlers: { type: "string" } } },
  prune: {
    run: runPrune,
    options: { "older-than": { type: "string" }, status: { type: "string", multiple: true }, "batch-size": { type: "string" }, into: { type: "string" } },
  },
  history: { run: historyCommand, options: { "drop-older-than": { type: "string" }, json: { type: "boolean" } } },
  upgrade: { run: upgradeCommand, options: { "batch-size": { type: "string" } } },
  limits: {
    run: limitsCommand,
    options: { json: { type: "boolean" }, concurrency: { type: "string" }, rate: { type: "string" }, burst: { type: "string" } },
  },
  groups: { run: groupsCommand, options: { json: { type: "boolean" } } },
  schedules: { run: schedulesCommand, options: { json: { type: "boolean" } } },
  queues: { run: queuesCommand, options: { json: { type: "boolean" } } },
  list: { run: listCommand, options: { ...FILTERS, limit: { type: "string" }, before: { type: "string" }, json: { type: "boolean" } } },
  show: { run: showCommand, options: { tenant: { type: "string" } } },
  retry: { run: retryCommand, options: { ...FILTERS, yes: { type: "boolean" } } },
  cancel: { run: cancelCommand, options: { ...FILTERS, yes: { type: "boolean" } } },
} as const;

/** Commands that take words after their name: a module path, or an action and its arguments. */
const POSITIONAL = new Set(["worker", "limits", "groups", "schedules", "queues", "show", "retry", "cancel"]);

/** Runs the CLI; returns the exit code (0 ok, 1 problems or a failure, 2 a usage error). */
export async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    io.out(HELP.main + "\n");
    return name ? 0 : 2;
  }
  if (name === "--version" || name === "-V" || name === "version") {
    io.out(`${packageVersion()}\n`);
    return 0;
  }
  const command = COMMANDS[name as keyof typeof COMMANDS];
  if (!command) {
    io.err(`forge-jobs: unknown command ${JSON.stringify(name)}; run forge-jobs --help\n`);
    return 2;
  }
  try {
    const given = negativeValues(rest, { ...COMMON, ...command.options });
    // `--watch` may come without a value: give it one so parseArgs accepts both forms.
    const args =
      name === "status"
        ? given.flatMap((a, i) => (a === "--watch" && (given[i + 1] === undefined || given[i + 1]!.startsWith("-")) ? ["--watch", "2"] : [a]))
        : given;
    let parsed: Parsed;
    try {
      parsed = parseArgs({ args, options: { ...COMMON, ...command.options }, allowPositionals: POSITIONAL.has(name), strict: true }) as Parsed;
    } catch (error) {
      throw new UsageError((error as Error).message.split("\n")[0]);
    }
    if (parsed.values.help) {
      io.out(HELP[name] + "\n");
      return 0;
    }
    if (parsed.values["database-url"] === undefined) databaseUrlFromEnvFile(process.env);
    await command.run(parsed, io);
    return 0;
  } catch (error) {
    if (error instanceof ProblemsFound) {
      io.err(`forge-jobs ${name}: ${error.message}\n`);
      return 1;
    }
    const usage = error instanceof UsageError || error instanceof JobError;
    io.err(`forge-jobs ${name}: error: ${oneLine(error)}\n`);
    return usage ? 2 : 1;
  }
}

/**
 * `--concurrency -1` as `--concurrency=-1`: parseArgs takes a value starting with "-" for an
 * option and answers "argument is ambiguous"; joined, the value reaches the command's own check,
 * which says what the option takes. Only numbers: no option of this CLI starts with a digit.
 */
function negativeValues(args: readonly string[], options: Record<string, { type: string }>): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const next = args[i + 1];
    if (arg.startsWith("--") && options[arg.slice(2)]?.type === "string" && next !== undefined && /^-\.?\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown })?.code;
  let text = message.split("\n")[0] || String(code ?? "unknown error");
  if (code && typeof code === "string" && !text.includes(code)) text = `${text} (${code})`;
  // PostgreSQL, SQLite and MariaDB each say "no table" their own way; the fix is the same.
  if (code === "42P01" || code === "ER_NO_SUCH_TABLE" || /no such table/i.test(text)) text += "; is the schema applied? run forge-jobs migrate";
  return text;
}
