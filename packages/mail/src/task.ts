import type { MailPayload } from "./mail-payload.js";

/**
 * A task name that carries its payload type as a phantom. Declared here rather than
 * imported so this package stays independent of any queue: a queue whose `enqueue`
 * reads `__payload` type-checks `enqueue(MAIL_JOB_TASK, payload)` all the same.
 */
export type TaskName<P> = string & { readonly __payload?: P };

/** The task under which mail jobs are enqueued and handled. Stable: stored in job rows. */
export const MAIL_JOB_TASK = "forge.mail.send" as TaskName<MailPayload>;
