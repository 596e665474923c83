import type { Transporter } from "nodemailer";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  createMailHandler,
  MAIL_JOB_TASK,
  messageToPayload,
  payloadToMessage,
  type MailHandler,
  type MailPayload,
  type MailTransporter,
  type NodemailerMessage,
  type TaskName,
} from "../src/index.js";

// The queue's side of the structural protocol, written here the way a queue would: no import.
type PayloadOf<T> = T extends { readonly __payload?: infer P } ? Exclude<P, undefined> : unknown;
declare function enqueue<T extends string>(task: T, payload: PayloadOf<T>): Promise<number>;
interface QueueContext {
  job: { id: number; task: string; attempt: number };
  claimToken: string;
  signal: AbortSignal;
  heartbeat(): Promise<boolean>;
}
type QueueHandlers = Readonly<Record<string, (payload: never, ctx: QueueContext) => unknown>>;

describe("MAIL_JOB_TASK", () => {
  it("is the stable string stored in job rows", () => {
    expect(MAIL_JOB_TASK).toBe("forge.mail.send");
    expectTypeOf(MAIL_JOB_TASK).toEqualTypeOf<TaskName<MailPayload>>();
  });

  it("lets a queue's enqueue accept only a mail payload (type-level)", () => {
    const typeCheckOnly = (): void => {
      void enqueue(MAIL_JOB_TASK, messageToPayload({ to: "a@example.com" }));
      // @ts-expect-error a payload that is not a MailPayload
      void enqueue(MAIL_JOB_TASK, { campaignId: 7 });
      // @ts-expect-error a message must go through messageToPayload first
      void enqueue(MAIL_JOB_TASK, { to: "a@example.com" });
    };
    expect(typeCheckOnly).toBeTypeOf("function");
  });

  it("the handler fits a queue's handler map and context without casts (type-level)", () => {
    const handlers: QueueHandlers = { [MAIL_JOB_TASK]: createMailHandler({ transport: "smtp://127.0.0.1:2525" }) };
    expect(Object.keys(handlers)).toEqual(["forge.mail.send"]);
    expectTypeOf<MailHandler>().parameter(0).toEqualTypeOf<unknown>();
  });

  it("payloadToMessage output goes to nodemailer's sendMail, and a nodemailer transporter is a MailTransporter (type-level)", () => {
    expectTypeOf<NodemailerMessage>().toMatchTypeOf<Parameters<Transporter["sendMail"]>[0]>();
    expectTypeOf<Transporter>().toMatchTypeOf<MailTransporter>();
    expectTypeOf(payloadToMessage).returns.toEqualTypeOf<NodemailerMessage>();
  });
});
