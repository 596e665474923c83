import { execFile, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * The Patroni + HAProxy cluster of tools/ha/cluster.sh, driven from a test. Its folder and
 * ports are the test's own (FORGE_HA_DIR, FORGE_HA_PORT_BASE override them).
 */
const SCRIPT = fileURLToPath(new URL("../../../../../tools/ha/cluster.sh", import.meta.url));
const DIR = process.env.FORGE_HA_DIR ?? "/tmp/forge-jobs-ha";
const BASE = Number(process.env.FORGE_HA_PORT_BASE ?? 55400);
const env = { ...process.env, FORGE_HA_DIR: DIR, FORGE_HA_PORT_BASE: String(BASE) };

/** Whether patroni, pysyncobj, haproxy and the PostgreSQL binaries are installed. */
export function haAvailable(): boolean {
  return spawnSync("bash", [SCRIPT, "check"], { env, stdio: "ignore" }).status === 0;
}

/** The one-line notice outside CI when they are not (in CI .ci/run installs them). */
export const HA_MISSING_NOTICE =
  "forge tests: patroni, python3-pysyncobj, haproxy or the PostgreSQL server binaries are missing; the failover test is skipped " +
  "(apt-get install -y patroni python3-pysyncobj haproxy)";

function cluster(args: string[], timeoutMs = 180_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("bash", [SCRIPT, ...args], { env, timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error) reject(new Error(`tools/ha/cluster.sh ${args.join(" ")}: ${error.message}\n${stderr}`));
      else resolve(stdout.trim());
    });
  });
}

export interface HaCluster {
  /** Through HAProxy: always the current primary. */
  url: string;
  mode: "sync" | "async";
  primary(): Promise<string>;
  /** SIGKILLs the primary's Patroni and postmaster; the node that was killed. */
  killPrimary(): Promise<string>;
  /** `patronictl list`: each member, its role and state, its lag. */
  status(): Promise<string>;
  stop(): Promise<void>;
}

export async function startHaCluster(mode: "sync" | "async"): Promise<HaCluster> {
  const onExit = () => spawnSync("bash", [SCRIPT, "stop"], { env, stdio: "ignore" });
  process.once("exit", onExit); // last resort: never leave a cluster running after the test run
  await cluster(["start", mode]);
  return {
    url: `postgres://postgres@127.0.0.1:${BASE}/postgres`,
    mode,
    primary: () => cluster(["primary"], 10_000),
    killPrimary: () => cluster(["kill-primary"], 10_000),
    status: () => cluster(["status"], 20_000),
    async stop() {
      process.off("exit", onExit);
      await cluster(["stop"], 60_000);
    },
  };
}
