/**
 * Thrown for invalid input to the queue (a bad option, a payload that is not JSON,
 * an unknown task name …). Nothing is written when it is thrown.
 */
export class JobError extends Error {
  /** The option or argument at fault, e.g. "priority" or "payload.items[2]". */
  readonly field: string | undefined;

  constructor(message: string, field?: string) {
    super(message);
    this.name = "JobError";
    this.field = field;
  }
}

/** The handler asked for no further attempt: `retryable === false` as an own property. */
export function isPermanent(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    Object.prototype.hasOwnProperty.call(error, "retryable") &&
    (error as { retryable: unknown }).retryable === false
  );
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) {
    return error.stack && error.stack.includes(error.message) ? error.stack : `${error.name}: ${error.message}`;
  }
  try {
    return `non-Error thrown: ${JSON.stringify(error)}`;
  } catch {
    return `non-Error thrown: ${String(error)}`;
  }
}
