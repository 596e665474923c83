import pg from "pg";
import { PG_URL, SCHEMA } from "../lib/env.js";
import { ForgeSystem } from "../systems/forge.js";
import { GraphileSystem } from "../systems/graphile.js";
import { pgForgeAdmin } from "../systems/pg-admin.js";
import { PgBossSystem } from "../systems/pgboss.js";
import type { QueueSystem } from "../systems/types.js";

/** The systems the pressure cells put side by side. */
export const PRESSURE_SYSTEMS = ["forge", "graphile", "pgboss"] as const;
export type PressureSystemId = (typeof PRESSURE_SYSTEMS)[number];

/** Each system's configuration when the command line does not name one (see BENCHMARKS.md). */
export const DEFAULT_VARIANTS: Record<PressureSystemId, string> = { forge: "default", graphile: "tuned", pgboss: "notify+tuned" };

/** One system opened for a pressure run, with what the orchestrator needs to watch its tables. */
export interface PressureTarget {
  system: QueueSystem;
  /** The schema that holds every table of the system. */
  schema: string;
  /** The queue table(s) the readers scan and the recovery check sizes (a partitioned parent counts its partitions). */
  hot: string[];
  /** The configuration `startWorker` gets (a pg-boss "notify+…" variant starts LISTEN and passes the rest). */
  workerVariant: string;
  /** The configuration in words. */
  describe: string;
  /** The admin connection the system's backlog count goes through. */
  admin: pg.Client;
}

/**
 * Opens `id` on PG_URL, migrated, and empty. PG_URL is read when lib/env loads, so a process
 * that gives each system its own database sets BENCH_PG_URL before it imports this module.
 */
export async function openTarget(id: PressureSystemId, variant: string): Promise<PressureTarget> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  let target: Omit<PressureTarget, "admin" | "workerVariant" | "describe">;
  let workerVariant = variant;
  let describe: string;
  if (id === "forge") {
    const system = new ForgeSystem("forge", "@forge/jobs", "postgres", PG_URL, SCHEMA.forge, pgForgeAdmin(admin));
    await system.prepare();
    target = { system, schema: SCHEMA.forge, hot: [system.table] };
    describe = system.describe();
  } else if (id === "graphile") {
    const system = new GraphileSystem(admin);
    await system.prepare();
    target = { system, schema: SCHEMA.graphile, hot: [`${SCHEMA.graphile}._private_jobs`] };
    describe = system.describe(variant);
  } else {
    // "notify+tuned": the batched worker, woken by NOTIFY instead of waiting out its 2 s poll.
    const notify = variant.startsWith("notify");
    if (variant.startsWith("notify+")) workerVariant = variant.slice("notify+".length);
    const system = new PgBossSystem(admin, SCHEMA.pgboss, notify);
    await system.prepare();
    target = { system, schema: SCHEMA.pgboss, hot: [`${SCHEMA.pgboss}.job`] };
    describe =
      system.describe(workerVariant) +
      (notify && workerVariant !== "notify" ? ", with new PgBoss({ useListenNotify: true }) and createQueue({ notify: true })" : "");
  }
  await target.system.reset();
  return { ...target, admin, workerVariant, describe };
}
