import { pauseQueue, resumeQueue } from "../maintenance/pause.js";
import { statusCounts } from "../reads/status.js";
import { openDatabase, type Io, type Parsed } from "./commands.js";
import { renderTable } from "./table.js";
import { UsageError } from "./usage.js";

const USAGE = { list: "queues list", pause: "queues pause <queue>", resume: "queues resume <queue>" };

/** `forge-jobs queues [list|pause|resume]`: each queue's state, and pausing or resuming one. */
export async function queuesCommand(p: Parsed, io: Io): Promise<void> {
  const [action = "list", ...args] = p.positionals;
  if (!(action in USAGE)) throw new UsageError(`unknown action ${JSON.stringify(action)}: use queues list, pause <queue> or resume <queue>`);
  const expected = action === "list" ? 0 : 1;
  if (args.length !== expected) {
    throw new UsageError(
      `usage: forge-jobs ${USAGE[action as keyof typeof USAGE]}${args.length > expected ? ` (unexpected ${JSON.stringify(args[expected])})` : ""}`,
    );
  }
  const db = openDatabase(p, { reading: action === "list" });
  try {
    if (action === "list") {
      const queues = (await statusCounts({ db: db.forReading() })).map((s) => ({
        queue: s.queue,
        paused: s.paused,
        pending: s.counts.pending,
        running: s.counts.running,
        ready: s.ready,
      }));
      if (p.values.json) io.out(JSON.stringify(queues, null, 2) + "\n");
      else if (queues.length === 0) io.out("no queues (a queue exists once it has a job or is paused)\n");
      else {
        const rows = queues.map((q) => [q.queue, q.paused ? "paused" : "active", String(q.pending), String(q.running), String(q.ready)]);
        io.out(renderTable(["QUEUE", "STATE", "PENDING", "RUNNING", "READY"], rows));
      }
      return;
    }
    const queue = args[0]!;
    if (action === "pause") {
      const changed = await pauseQueue(queue, { db });
      io.out(changed ? `paused ${queue}; running jobs finish, no worker starts another until it is resumed\n` : `${queue} was already paused\n`);
    } else {
      const changed = await resumeQueue(queue, { db });
      io.out(changed ? `resumed ${queue}\n` : `${queue} was not paused; nothing to do\n`);
    }
  } finally {
    await db.close();
  }
}
