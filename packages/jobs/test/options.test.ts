import { describe, expect, expectTypeOf, it } from "vitest";
import { DEFAULT_LEASE_SECONDS, WORKER_DEFAULTS, type DrainOptions, type ProcessOptions, type WorkerOptions } from "../src/core/options.js";
import { DRAIN_OPTION_KEYS, ENQUEUE_ITEM_KEYS, ENQUEUE_OPTION_KEYS, PROCESS_OPTION_KEYS, WORKER_OPTION_KEYS } from "../src/core/option-keys.js";
import type { DrainOptions as DrainOptionsOfDrain, ProcessOptions as ProcessOptionsOfProcess } from "../src/worker/process.js";
import type { WorkerOptions as WorkerOptionsOfWorker } from "../src/worker/worker.js";
import { DEFAULT_LEASE_SECONDS as PUBLIC_DEFAULT_LEASE } from "../src/index.js";

describe("the options module", () => {
  it("lists each interface's keys, in the order errors name them", () => {
    // The lists are built from Record<keyof Options, true>: tsc refuses a missing or foreign key.
    expect(ENQUEUE_OPTION_KEYS).toEqual([
      "queue",
      "maxAttempts",
      "availableIn",
      "priority",
      "idempotencyKey",
      "dedupKey",
      "throttle",
      "debounce",
      "deadLetter",
      "tenant",
      "group",
      "concurrencyKey",
      "maxSnoozes",
      "priorityAging",
      "dependsOn",
      "onDependencyFailure",
      "sequence",
      "db",
    ]);
    expect(ENQUEUE_ITEM_KEYS).toEqual([
      "task",
      "payload",
      "ref",
      "queue",
      "maxAttempts",
      "availableIn",
      "priority",
      "idempotencyKey",
      "dedupKey",
      "throttle",
      "debounce",
      "deadLetter",
      "tenant",
      "group",
      "concurrencyKey",
      "maxSnoozes",
      "priorityAging",
      "dependsOn",
      "onDependencyFailure",
      "sequence",
    ]);
    expect(DRAIN_OPTION_KEYS).toEqual([...PROCESS_OPTION_KEYS, "maxJobs", "signal"]);
    expect(WORKER_OPTION_KEYS).toHaveLength(14);
  });

  it("keeps one default lease, still exported publicly", () => {
    expect(DEFAULT_LEASE_SECONDS).toBe(30);
    expect(PUBLIC_DEFAULT_LEASE).toBe(30);
    expect(WORKER_DEFAULTS.lease).toBe(DEFAULT_LEASE_SECONDS);
  });

  it("describes the same worker and process options as the modules that take them", () => {
    // Until worker.ts and process.ts import their option types from options.ts, a drift fails tsc here.
    expectTypeOf<WorkerOptionsOfWorker>().toEqualTypeOf<WorkerOptions>();
    expectTypeOf<ProcessOptionsOfProcess>().toEqualTypeOf<ProcessOptions>();
    expectTypeOf<DrainOptionsOfDrain>().toEqualTypeOf<DrainOptions>();
  });
});
