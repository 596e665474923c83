import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chown, mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A PostgreSQL server of the test's own (initdb into a temporary folder, its own port), so a
 * test can restart it or cut its connections without touching the shared server. PostgreSQL
 * refuses to run as root: as root, every server command runs as the `postgres` OS user.
 */
export interface PrivatePostgres {
  url: string;
  port: number;
  dir: string;
  stop(mode?: "fast" | "immediate"): Promise<void>;
  start(): Promise<void>;
  restart(mode?: "fast" | "immediate"): Promise<void>;
  /** Stops the server (if running) and deletes its folder. Safe to call twice. */
  destroy(): Promise<void>;
  log(): Promise<string>;
}

/** The newest PostgreSQL server binaries on this machine (FORGE_PG_BIN overrides), or null. */
export function postgresBinDir(): string | null {
  if (process.env.FORGE_PG_BIN) return process.env.FORGE_PG_BIN;
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], "bin") : null;
}

function run(command: string, args: string[], timeoutMs = 60_000): Promise<string> {
  const asRoot = process.getuid?.() === 0;
  const [file, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", command, ...args]] : [command, args];
  return new Promise((resolve, reject) => {
    // 'exit', not 'close': the server pg_ctl starts must not keep us waiting on inherited pipes.
    const child = spawn(file, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", (error) => (clearTimeout(timer), reject(error)));
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${command} ${args.join(" ")} exited with ${code}:\n${output}`));
    });
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const passwd = await readFile("/etc/passwd", "utf8");
  const line = passwd.split("\n").find((l) => l.startsWith("postgres:"));
  if (!line) throw new Error("running as root, but there is no postgres OS user to run the server as");
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}

export async function startPrivatePostgres(bin: string): Promise<PrivatePostgres> {
  const dir = await mkdtemp(join(tmpdir(), "forge-jobs-pg-"));
  const data = join(dir, "data");
  const logFile = join(dir, "server.log");
  if (process.getuid?.() === 0) {
    const { uid, gid } = await postgresIds();
    await chown(dir, uid, gid);
  }
  const port = await freePort();
  let running = false;
  let destroyed = false;
  const pgCtl = (args: string[]) => run(join(bin, "pg_ctl"), ["-D", data, ...args]);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=60`;
  // Last resort if the test run itself dies before destroy(): never leave a server running.
  const onExit = () => {
    const args = [join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop"];
    if (process.getuid?.() === 0) spawnSync("runuser", ["-u", "postgres", "--", ...args], { stdio: "ignore" });
    else spawnSync(args[0]!, args.slice(1), { stdio: "ignore" });
  };
  process.once("exit", onExit);
  const instance: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dir,
    async start() {
      await pgCtl(["-o", options, "-l", logFile, "-w", "-t", "60", "start"]);
      running = true;
    },
    async stop(mode = "fast") {
      await pgCtl(["-m", mode, "-w", "-t", "60", "stop"]);
      running = false;
    },
    async restart(mode = "fast") {
      running = false;
      await pgCtl(["-o", options, "-l", logFile, "-m", mode, "-w", "-t", "60", "restart"]);
      running = true;
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      process.off("exit", onExit);
      if (running || existsSync(join(data, "postmaster.pid"))) await pgCtl(["-m", "immediate", "-w", "-t", "30", "stop"]).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
    log: () => readFile(logFile, "utf8").catch(() => ""),
  };
  try {
    await run(join(bin, "initdb"), ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"]);
    await instance.start();
  } catch (error) {
    await instance.destroy();
    throw error;
  }
  return instance;
}
