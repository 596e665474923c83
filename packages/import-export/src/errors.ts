export interface JobErrorOptions {
  /** False fails the job at once; true lets the queue retry it with backoff. */
  retryable: boolean;
  cause?: unknown;
}

/**
 * Base of the errors the handlers throw. `retryable` is an own property because that is
 * what the queue reads: `retryable === false` fails the job now, anything else is retried.
 */
export class CsvJobError extends Error {
  override name = "CsvJobError";
  readonly retryable: boolean;

  constructor(message: string, options: JobErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.retryable = options.retryable;
  }
}

export class ImportError extends CsvJobError {
  override name = "ImportError";
}

export class ExportError extends CsvJobError {
  override name = "ExportError";
}

export type JobErrorClass = new (message: string, options: JobErrorOptions) => CsvJobError;

/** An error that already told the queue not to retry keeps its verdict. */
export function isFinal(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    Object.prototype.hasOwnProperty.call(error, "retryable") &&
    (error as { retryable: unknown }).retryable === false
  );
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Wraps a failure of the outside world (disk, database, the app's own code) as retryable,
 * unless the app's error already said that no retry can fix it.
 */
export function retryableFailure(Class: JobErrorClass, what: string, error: unknown): unknown {
  if (isFinal(error)) return error;
  return new Class(`${what}: ${messageOf(error)}`, { retryable: true, cause: error });
}

export function takenOver(Class: JobErrorClass): CsvJobError {
  return new Class("job was taken over by another worker; stopping without writing more", { retryable: true });
}
