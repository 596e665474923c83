import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { connect, migrate } from "@forge/jobs";
import { buildApp } from "../src/app.js";
import { APP_DIR, loadConfig, type AppConfig } from "../src/config.js";
import { openDatabase, type AppDatabase } from "../src/db.js";
import { migrateApp } from "../src/migrate.js";

export const PG_URL = process.env.FORGE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface Env {
  name: "postgres" | "sqlite";
  config: AppConfig;
  db: AppDatabase;
  /** SQL that makes inserting an `imports` row for `org` fail (a business-row failure after the enqueue). */
  breakImportsFor(org: string): Promise<void>;
  count(where?: string, params?: unknown[]): Promise<number>;
  close(): Promise<void>;
}

/** A fresh data dir and a fresh database (own PostgreSQL schema, or own SQLite file), migrated. */
export async function createEnv(name: Env["name"], overrides: Partial<AppConfig> = {}): Promise<Env> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "forge-sample-test-"));
  const schema = name === "postgres" ? `sample_${randomBytes(5).toString("hex")}` : undefined;
  const config: AppConfig = {
    ...loadConfig({}),
    dataDir,
    databaseUrl: name === "postgres" ? PG_URL : `sqlite:${path.join(dataDir, "sample.db")}`,
    databaseSchema: schema,
    ...overrides,
  };
  const db = openDatabase(config);
  await migrateApp(db);
  return {
    name,
    config,
    db,
    async breakImportsFor(org) {
      if (name === "postgres") {
        await db.sql.query(`ALTER TABLE ${db.imports} ADD CONSTRAINT broken_${org.replace(/\W/g, "_")} CHECK (org <> '${org}')`);
      } else {
        await db.sql.query(
          `CREATE TRIGGER broken_${org.replace(/\W/g, "_")} BEFORE INSERT ON imports WHEN NEW.org = '${org}' BEGIN SELECT RAISE(ABORT, 'imports refused for ${org}'); END`,
        );
      }
    },
    async count(where = "1 = 1", params = []) {
      const { rows } = await db.sql.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${db.jobs.table} WHERE ${where}`, params);
      return Number(rows[0]!.n);
    },
    async close() {
      if (schema) await db.sql.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await db.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** SQLite is the embedded default; its backend in @forge/jobs may still be in the works. */
export async function sqliteReady(): Promise<boolean> {
  const dir = await mkdtemp(path.join(tmpdir(), "forge-sample-probe-"));
  const db = connect(`sqlite:${path.join(dir, "probe.db")}`);
  try {
    await migrate({ db });
    return true;
  } catch {
    return false;
  } finally {
    await db.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Whether PostgreSQL's tests run: not when FORGE_TEST_BACKENDS leaves it out (set by the test
 * run's global setup when the server does not answer outside CI).
 */
export const postgresOn = !process.env.FORGE_TEST_BACKENDS || process.env.FORGE_TEST_BACKENDS.split(",").includes("postgres");

export async function backendNames(): Promise<Env["name"][]> {
  const names: Env["name"][] = postgresOn ? ["postgres"] : [];
  if (await sqliteReady()) names.push("sqlite");
  return names;
}

export { startSmtpCatcher as startSmtp } from "../src/smtp-catcher.js";

/** src/worker.ts in its own process, as `pnpm worker` runs it; `extraEnv` adds to (or overrides) its environment. */
export function spawnWorker(
  env: Env,
  smtpUrl: string | undefined,
  extraEnv: Record<string, string> = {},
): { child: ChildProcess; output: string[]; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(APP_DIR, "src", "worker.ts")], {
    cwd: APP_DIR,
    env: {
      ...process.env,
      DATABASE_URL: env.config.databaseUrl,
      DATABASE_SCHEMA: env.config.databaseSchema ?? "",
      DATA_DIR: env.config.dataDir,
      SMTP_URL: smtpUrl ?? "",
      ...extraEnv,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) stream.on("data", (chunk: Buffer) => output.push(chunk.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output, exited };
}

/** The sample app on port 0. */
export async function startApp(env: Env, overrides: Partial<AppConfig> = {}, logger: unknown = false) {
  const { app } = await buildApp({ ...env.config, ...overrides }, { db: env.db, logger: logger as never });
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address() as { port: number };
  return { app, url: `http://127.0.0.1:${address.port}`, close: () => app.close() };
}

/** Polls without fixed sleeps: fails with `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function csvUpload(csv: string | Buffer, name = "contacts.csv", field = "file"): FormData {
  const form = new FormData();
  form.append(field, new Blob([csv], { type: "text/csv" }), name);
  return form;
}

/** A port nothing listens on (taken and given back at once). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.once("error", reject);
  });
}
