/** The queues the worker serves; the web process enqueues into them. */
export const QUEUES = { mails: "mails", imports: "imports", exports: "exports" } as const;
