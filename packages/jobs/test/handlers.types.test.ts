// Type tests: tsc (pnpm typecheck) checks the @ts-expect-error lines (an unneeded directive is
// an error too, so each line must fail to compile); vitest runs the rest.
import { describe, expect, it } from "vitest";
import { handler, type Handlers, type TaskName } from "../src/index.js";

const SEND = "send_invoice" as TaskName<{ invoiceId: string }>;

describe("handler(task, fn): a handler checked against its task's payload type (issue 16.17)", () => {
  it("types the payload from the task name, and refuses a handler written for another payload", () => {
    const ok = handler(SEND, (payload) => payload.invoiceId.toUpperCase());
    // @ts-expect-error — the payload has no `b`: a handler for another task's payload.
    handler(SEND, (payload: { b: number }) => payload.b);
    // @ts-expect-error — reading a field the payload does not have.
    handler(SEND, (payload) => payload.amount);
    const handlers: Handlers = { ...ok, ...handler("plain", (payload) => payload) };
    expect(Object.keys(handlers)).toEqual(["send_invoice", "plain"]);
    expect(ok[SEND]!({ invoiceId: "a" }, undefined as never)).toBe("A");
  });
});
