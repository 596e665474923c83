import type { ExportPayload, ImportPayload } from "./payload.js";

/**
 * A task name that carries its payload type as a phantom, so a queue whose `enqueue`
 * reads `P` back from the name type-checks the payload without importing this package.
 * Declared here, not imported: this package shares a shape with the queue, never code.
 */
export type TaskName<P> = string & { readonly __payload?: P };

export const IMPORT_JOB_TASK = "forge.import.csv" as TaskName<ImportPayload>;

export const EXPORT_JOB_TASK = "forge.export.csv" as TaskName<ExportPayload>;
