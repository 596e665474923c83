import type { JobInfo } from "./types.js";

/** Why a run's signal fired. */
export class JobAbortedError extends Error {
  constructor(
    readonly reason: "lease-lost" | "shutdown" | "cancelled",
    message: string,
  ) {
    super(message);
    this.name = "JobAbortedError";
  }
}

/**
 * A run's AbortController, made only when the handler reads `ctx.signal`: most handlers never
 * do, and an AbortController with its signal was the largest single allocation per job.
 * Aborted before anyone looked, the signal comes out aborted.
 */
export class RunAbort {
  private controller: AbortController | null = null;
  private why: JobAbortedError | null = null;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.why) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  /** Why the run was aborted, or null while it was not. */
  get reason(): JobAbortedError | null {
    return this.why;
  }

  abort(reason: JobAbortedError): void {
    if (this.why) return;
    this.why = reason;
    this.controller?.abort(reason);
  }
}

/** The run no longer owns its job (taken over, cancelled): its signal fires, once. */
export function loseJob(abort: RunAbort, info: JobInfo): void {
  if (!abort.reason) {
    abort.abort(new JobAbortedError("lease-lost", `job ${info.id} was taken over or cancelled; this run no longer owns it`));
  }
}
