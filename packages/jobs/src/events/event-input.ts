import { JobError } from "../base/errors.js";
import { toJsonText } from "../base/payload.js";
import type { WaitForEventOptions } from "../base/types.js";
import { checkKnownOptions, checkName, checkTenant, describe } from "../base/validate.js";
import { MAX_SLEEP_SECONDS } from "../run/sleep.js";
import type { EventWait } from "../run/wait-event.js";
import type { EventMatch } from "./event-lock.js";
import type { DbLike } from "../core/options.js";

const WAIT_OPTION_KEYS = ["event", "key", "timeout"] as const;
const SEND_OPTION_KEYS = ["key", "tenant", "db"] as const;

/** `sendEvent`'s options: the event's key, its tenant (left out: no tenant), and the `db` it is written in. */
export interface SendEventOptions {
  /** Which waits it is for (an order id…): only a wait of the same event and key receives it. */
  key: string;
  /** The tenant whose jobs' waits it wakes; left out, only jobs without a tenant. */
  tenant?: string;
  /** A queue database, or a client inside your transaction: the event exists, and wakes its waiters, when you commit. */
  db?: DbLike;
}

/** A wait's event and key, checked; `fail` makes the handler's error (a step's, not retried). */
export function checkEventWait(
  name: string,
  options: WaitForEventOptions,
  tenant: string | null,
  fail: (message: string, field: string) => JobError,
): EventWait {
  const call = `ctx.waitForEvent(${JSON.stringify(name)}, options)`;
  try {
    if (typeof options !== "object" || options === null)
      throw new JobError(`${call}: options must be { event, key, timeout? }, got ${describe(options)}`, "options");
    checkKnownOptions(options, WAIT_OPTION_KEYS, call);
    const event = checkName(options.event, "event");
    const key = checkName(options.key, "key");
    const timeout = options.timeout;
    if (timeout !== undefined && (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0 || timeout > MAX_SLEEP_SECONDS)) {
      throw new JobError(
        `timeout must be a number of seconds more than 0 and at most ${MAX_SLEEP_SECONDS} (366 days), or left out to wait until the event comes; got ${describe(timeout)}`,
        "timeout",
      );
    }
    return { kind: "event", event, key, tenant: tenant ?? "", timeout: timeout ?? null };
  } catch (error) {
    if (!(error instanceof JobError)) throw error;
    throw fail(error.message.startsWith(call) ? error.message : `${call}: ${error.message}`, error.field ?? "options");
  }
}

/** `sendEvent`'s arguments, checked before anything is written. */
export function checkSendEvent(event: unknown, data: unknown, options: SendEventOptions): { match: EventMatch; data: string | null } {
  if (typeof options !== "object" || options === null)
    throw new JobError(`sendEvent: options must be { key, tenant?, db? }, got ${describe(options)}`, "options");
  checkKnownOptions(options, SEND_OPTION_KEYS, "sendEvent");
  const name = checkName(event, "event");
  if (options.key === undefined)
    throw new JobError(`sendEvent(${JSON.stringify(name)}): options.key is required: the key a wait names (an order id…) to receive this event`, "key");
  const key = checkName(options.key, "key");
  const tenant = checkTenant(options.tenant, "tenant", "an event for jobs without a tenant");
  const json = toJsonText(data, "data");
  return { match: { event: name, key, tenant: tenant ?? "" }, data: json };
}
