/**
 * One system of the pressure cells in its own process, on its own database: a fixed-rate
 * producer and a worker (load.ts). Says "ready" with the tables to watch, then answers the
 * orchestrator: "describe" repeats what "ready" said (forkReady keeps only that it came), "rate" changes the offered rate, "take" returns the counts since the last take
 * (and the backlog when asked), "stop" ends the producer and the worker.
 *
 *   argv: <system id> <database url> <variant> <concurrency> <rate> <work ms>
 */
import type { LoadWindow } from "./load.js";
import type { PressureSystemId } from "./systems.js";

/** What the child sends back. */
export type ChildMessage =
  { type: "ready"; schema: string; hot: string[]; describe: string } | ({ type: "window"; backlog: number | null } & LoadWindow) | { type: "stopped" };

/** What the orchestrator sends. */
export type ParentMessage = { type: "describe" } | { type: "rate"; rate: number } | { type: "take"; backlog: boolean } | { type: "stop" };

const [id, url, variant, concurrency, rate, workMs] = process.argv.slice(2) as [PressureSystemId, string, string, string, string, string];
// Before the systems load: lib/env reads it once, and it is this system's database.
process.env.BENCH_PG_URL = url;
const { openTarget } = await import("./systems.js");
const { startLoad } = await import("./load.js");

const target = await openTarget(id, variant);
const load = await startLoad(target.system, { rate: Number(rate), workMs: Number(workMs), concurrency: Number(concurrency), variant: target.workerVariant });
const send = (message: ChildMessage, then: () => void = () => undefined) => process.send!(message, then);

const ready: ChildMessage = { type: "ready", schema: target.schema, hot: target.hot, describe: target.describe };
process.on("message", (message: ParentMessage) => {
  if (message.type === "describe") send(ready);
  else if (message.type === "rate") load.setRate(message.rate);
  else if (message.type === "take") {
    const window = load.take();
    void (message.backlog ? target.system.unfinished() : Promise.resolve(null)).then((backlog) => send({ type: "window", backlog, ...window }));
  } else {
    void (async () => {
      await load.stop();
      await target.system.close();
      await target.admin.end();
      send({ type: "stopped" }, () => process.exit(0));
    })();
  }
});
send(ready);
