export type Payload = { i: number };

export interface StartOptions {
  concurrency: number;
  /** Which configuration: "default", "tuned", … — see each system's `variants`. */
  variant: string;
  /**
   * Called when the handler starts; a promise it returns is awaited by the handler (the pressure
   * cells give their jobs 1 ms of work that way), so the job ends when it settles.
   */
  onJob: (payload: Payload) => void | Promise<void>;
}

export interface WorkerHandle {
  stop(): Promise<void>;
}

export interface QueueSystem {
  /** Stable key used in results/latest.json. */
  id: string;
  label: string;
  backend: "postgres" | "sqlite" | "mariadb";
  /** Configurations measured for processing throughput, and the one used for latency. */
  variants: { processing: string[]; latency: string };
  describe(variant: string): string;
  prepare(): Promise<void>;
  /** Empties the system's tables (every measured run starts from an empty queue). */
  reset(): Promise<void>;
  enqueueOne(payload: Payload): Promise<void>;
  enqueueBulk(payloads: Payload[]): Promise<void>;
  startWorker(options: StartOptions): Promise<WorkerHandle>;
  /** Jobs not finished yet (pending, locked or running). */
  unfinished(): Promise<number>;
  close(): Promise<void>;
}

/** Thrown by prepare() when a backend is not there yet: the measure prints a skip line. */
export class Unavailable extends Error {}
