/** A mistake in the command line: printed as one line, exit code 2. */
export class UsageError extends Error {}

/** A check that found problems (doctor): exit code 1. */
export class ProblemsFound extends Error {}

export const COMMON_OPTIONS = `
Common options:
  --database-url <url>   postgres://…, mysql://…, sqlite:<path> (default: $DATABASE_URL, else DATABASE_URL in ./.env,
                         else sqlite:forge-jobs.db)
  --schema <name>        PostgreSQL schema / MariaDB database of the jobs table
  --read-url <url>       PostgreSQL read replica for status, list and show (default: $DATABASE_READ_URL)
  -h, --help             this help`;

export const HELP: Record<string, string> = {
  main: `Usage: forge-jobs <command> [options]

Commands:
  init      write the migration SQL into a folder of your app, for review
  migrate   apply pending migrations (under a lock; safe to run from several processes)
  status    per-queue counts: PENDING RUNNING FAILED DONE READY WAITING (read-only)
  reclaim   take back jobs whose worker was lost
  worker    run a worker with the handlers exported by a module
  doctor    check the schema, stuck jobs, tasks and schedules without handlers
  prune     delete ended jobs older than a duration from history
  history   the history table's days (PostgreSQL); drop the days past a retention
  upgrade   move the ended jobs an older version left in the jobs table into history (online)
  limits    list, set or remove concurrency and rate limits per key
  groups    list fair-share groups, or set a group's weight
  schedules list recurring schedules; pause, resume or trigger one
  queues    list queues and whether each is paused; pause or resume one
  list      jobs by queue, status, task, tenant or age, newest first, a page at a time
  show      one job, whole: payload, progress, result, attempts, last error, timings
  retry     put a failed (or cancelled) job back, or every job a filter matches (--yes)
  cancel    cancel a pending or running job, or every job a filter matches (--yes)

Run 'forge-jobs <command> --help' for a command's options; 'forge-jobs --version' for the version.${COMMON_OPTIONS}`,
  init: `Usage: forge-jobs init [--dir <folder>] [--dialect postgres|sqlite|mysql]

Writes one SQL file per migration (NNN_forge_jobs_<name>.<dialect>.sql) into --dir
(default ./migrations), for teams that apply migrations with their own tool. Existing
files are left alone. The dialect comes from --dialect or from the database URL.${COMMON_OPTIONS}`,
  migrate: `Usage: forge-jobs migrate

Applies the pending migrations and records them; running it twice changes nothing.${COMMON_OPTIONS}`,
  status: `Usage: forge-jobs status [--queue <name>] [--json] [--watch [seconds]]

Counts per queue. READY is pending and runnable now: a job delayed by availableIn or by a
retry backoff is PENDING but not READY. WAITING: jobs waiting on their dependencies
(dependsOn) or a batch's callback waiting on its items; not PENDING. Under the queues, when there are any: the limits
(running and throttled jobs per limit, as forge-jobs limits list) and the fair-share groups
(ready, running, wait p50/p95 over the last 5 minutes, as forge-jobs groups list); these span
every queue. STATE (active or paused) is added when a queue is paused (forge-jobs queues pause).
--json prints the queues only, each with "paused". Read-only: it changes nothing.
  --queue <name>     one queue only
  --json             machine-readable output
  --watch [seconds]  redraw every N seconds (default 2, at least 0.5) until Ctrl-C; the screen
                     is cleared only on a terminal (piped, each redraw is appended)
A --queue with no job ever in it is an error (exit 1) naming the queues that have jobs.${COMMON_OPTIONS}`,
  reclaim: `Usage: forge-jobs reclaim [--lease <seconds>] [--queue <name>]

Takes back running jobs whose worker is gone: pending again while attempts remain, else
failed with "worker lost without a verdict". Without --lease, jobs whose own lease expired;
with --lease N, jobs with no heartbeat for N seconds (0 = every running job). Workers do this
on their own; this command is for operators and cron.${COMMON_OPTIONS}`,
  worker: `Usage: forge-jobs worker <handlers-module> [--queue <name> ...] [--concurrency <n>] [--lease <seconds>]

Runs a worker. The module's default export (or its export 'handlers') is the handlers
object { [task]: handler }. SIGTERM or SIGINT stops it gracefully (in-flight jobs finish
within --grace seconds, the rest are handed back); a second signal stops it at once.
For a TypeScript module run: node --import tsx $(which forge-jobs) worker ./handlers.ts
  --queue <name>         a queue to serve; repeat for several (default: default)
  --concurrency <n>      handlers at once (default 10)
  --lease <seconds>      lease per claim, extended while running (default 30)
  --grace <seconds>      shutdown grace period (default 10)
  --poll <seconds>       poll interval when no wake-up arrives (default 1)
  --listen-url <url>     PostgreSQL URL straight to the server for wake-ups, when --database-url
                         goes through a transaction pooler (default: $DATABASE_LISTEN_URL)
  --no-schedules         do not run the scheduler (by default every worker enqueues the due
                         runs of the stored schedules; see forge-jobs schedules)${COMMON_OPTIONS}`,
  doctor: `Usage: forge-jobs doctor [--handlers <module>]

Checks that the schema is applied and current, that no ended job is left in the jobs table by
an older version (forge-jobs upgrade), that no job is stuck past its lease, and —
with --handlers — that every queued task and every schedule's task has a handler. Exit code 1 when a check fails.${COMMON_OPTIONS}`,
  limits: `Usage: forge-jobs limits [list] [--json]
       forge-jobs limits set <key> [--concurrency <n>] [--rate <n>/<duration>] [--burst <n>]
       forge-jobs limits rm <key>

Limits of the jobs that carry a concurrency key, stored in the database: every worker applies
them at its next claim. <key> is exact (smtp:ses) or a prefix pattern ending in * (org:*)
that gives each matching key its own limit; an exact key wins over patterns, the longest
pattern over shorter ones (quote patterns in the shell: 'org:*').
  list                 KEY RUNNING CONCURRENCY RATE BURST THROTTLED (read-only); THROTTLED
                       counts ready jobs the limit or the rate holds back now
  set                  store a key's limit, replacing the one it had: a setting left out
                       means no such limit. Lowering a limit stops no running job
  --concurrency <n>    at most n jobs of the key hold a lease at once (0 pauses the key)
  --rate <n>/<d>       at most n starts per duration d (14/1s, 600/1m, 100/h; 14/1 = per second)
  --burst <n>          starts allowed at once after a pause (default: the rate's n)
  rm                   remove a key's limit (exit code 1 when it had none)
  --json               list as JSON${COMMON_OPTIONS}`,
  groups: `Usage: forge-jobs groups [list] [--json]
       forge-jobs groups weight <group> <n>

Fair-share groups (a job's group, else its tenant). Within a queue and priority, groups with
ready jobs are served in weighted round-robin.
  list                 GROUP WEIGHT READY RUNNING WAIT_P50 WAIT_P95 (read-only); the wait is
                       from due to started, over jobs started in the last 5 minutes
  weight               set a group's weight (an integer ≥ 1; 1 is the default)
  --json               list as JSON${COMMON_OPTIONS}`,
  schedules: `Usage: forge-jobs schedules [list] [--json]
       forge-jobs schedules pause <name>
       forge-jobs schedules resume <name>
       forge-jobs schedules trigger <name>

Recurring schedules, stored in the database (declared by the application with schedule() or
syncSchedules()); workers enqueue their runs.
  list                 NAME CRON TIMEZONE TASK QUEUE NEXT_RUN LAST_RUN STATE (read-only; times in UTC)
  pause                no more runs until resumed; its runs still pending are cancelled
  resume               runs again from its next slot after now (slots missed while paused do not run)
  trigger              enqueue one run now, whatever the cron
  --json               list as JSON${COMMON_OPTIONS}`,
  queues: `Usage: forge-jobs queues [list] [--json]
       forge-jobs queues pause <queue>
       forge-jobs queues resume <queue>

Queues exist by their name: one with jobs, or one paused. A paused queue keeps its jobs and
takes new ones; no worker starts any of them until it is resumed (within one poll interval,
at once where workers are woken); jobs already running finish. The pause is stored in the
database: it outlives restarts.
  list                 QUEUE STATE PENDING RUNNING READY (read-only)
  pause                no worker starts another job of the queue (pausing twice is fine)
  resume               workers take the queue's jobs again
  --json               list as JSON${COMMON_OPTIONS}`,
  prune: `Usage: forge-jobs prune --older-than <duration> [--status done,failed,cancelled] [--batch-size N]

Deletes done, failed and cancelled jobs that ended more than <duration> ago
(e.g. 7d, 12h, 30m, 90s, or a number of seconds) from history (and those an older version
left in the jobs table), oldest first, N rows (default 1000) per short transaction: workers
keep claiming while it runs.
  --status       only these ended states (a comma list, or the option repeated)
  --batch-size   rows per statement, 1 to 100000
  --into history move the ended jobs an older version left in the jobs table into history
                 instead of deleting them (as 'forge-jobs upgrade' does)${COMMON_OPTIONS}`,
  history: `Usage: forge-jobs history [--json]
       forge-jobs history --drop-older-than <duration>

PostgreSQL's history table, where every job that ends is moved: one partition per UTC day. Without options, lists DAY ROWS SIZE (rows as the statistics estimate them; read-only).
  --drop-older-than   drop the days that ended more than <duration> ago (e.g. 90d): each is a
                      DROP TABLE of its partition, with no row deleted one by one
  --json              the list as JSON${COMMON_OPTIONS}`,
  upgrade: `Usage: forge-jobs upgrade [--batch-size N]

A database migrated from a version that kept ended jobs (done, failed, cancelled) in the jobs
table still holds them there: reads and counts include them, but the table stays as big as it
was. This moves them into the history table, oldest first, N rows (default 1000) per short
transaction over rows it locks without waiting: workers keep running meanwhile (and do the same
on their own, a small batch at a time). Killed at any point, nothing is lost or counted twice:
run it again and it carries on. 'forge-jobs doctor' says how many are left.
  --batch-size   rows per transaction, 1 to 100000${COMMON_OPTIONS}`,
  list: `Usage: forge-jobs list [--queue <name>] [--status <status>] [--task <task>] [--tenant <id>] [--older-than <duration>] [--limit N] [--before <id>] [--json]

Jobs matching every filter given, newest first, --limit (default 50, at most 500) a page; the
last line names the --before of the next page. --status: pending, running, done, failed or
cancelled. --older-than: created at least that long ago (7d, 12h, 30m, 90s).${COMMON_OPTIONS}`,
  show: `Usage: forge-jobs show <id> [--tenant <id>]

The whole job as JSON: payload, progress, result, attempts, last error and timings. Exit 1
when there is no such job (or it belongs to another tenant than --tenant).${COMMON_OPTIONS}`,
  retry: `Usage: forge-jobs retry <id>
       forge-jobs retry [--status failed|cancelled] [--queue <name>] [--task <task>] [--tenant <id>] [--older-than <duration>] [--yes]

One job by id, or every job the filters match (--status defaults to failed): without --yes the
matching jobs are only counted; with --yes each is put back in its queue with one more attempt
allowed. 'retry --yes' with no filter retries every failed job. A job whose dedup key another active job holds is left, with a line saying so.${COMMON_OPTIONS}`,
  cancel: `Usage: forge-jobs cancel <id>
       forge-jobs cancel [--status pending|running] [--queue <name>] [--task <task>] [--tenant <id>] [--older-than <duration>] [--yes]

One job by id, or every job the filters match (give at least one; --status defaults to
pending): without --yes the matching jobs are only counted; with --yes each is cancelled (a
running handler's signal fires at its next lease extension).${COMMON_OPTIONS}`,
};

/** "7d", "12h", "30m", "90s", "3600" → seconds. */
export function parseDuration(text: string, option: string): number {
  const match = /^(\d+(?:\.\d+)?)(s|m|h|d|w)?$/.exec(text.trim());
  if (!match) throw new UsageError(`${option} must be a duration like 7d, 12h, 30m, 90s or a number of seconds, got ${JSON.stringify(text)}`);
  const unit = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }[(match[2] ?? "s") as "s"];
  return Number(match[1]) * unit;
}

export function parseNumber(text: string | undefined, option: string, integer = false): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value) || value < 0 || (integer && !Number.isInteger(value))) {
    throw new UsageError(`${option} must be a ${integer ? "whole " : ""}number ≥ 0, got ${JSON.stringify(text)}`);
  }
  return value;
}
