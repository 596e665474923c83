import type { JobHandler, PayloadOf } from "./types.js";

/**
 * A handler checked against its task's payload type. Written inline as
 * `{ [SEND_INVOICE]: async (p) => … }`, a computed key of a branded task name becomes an index
 * signature and the payload type is lost; `handler(SEND_INVOICE, async (p) => …)` keeps it, so a
 * handler written for another payload is a type error. Spread several into the handlers object.
 */
export function handler<T extends string, R = unknown>(task: T, fn: JobHandler<PayloadOf<T>, R>): { readonly [K in T]: JobHandler<PayloadOf<T>, R> } {
  return { [task]: fn } as { readonly [K in T]: JobHandler<PayloadOf<T>, R> };
}
