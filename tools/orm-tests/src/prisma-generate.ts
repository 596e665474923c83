import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Generates the three Prisma clients (one per backend: a Prisma schema has one provider) into
 * generated/, which is not committed. Runs as the test project's global setup and before the
 * typecheck; skips a client newer than its schema.
 */
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const PRISMA_PROVIDERS = ["postgresql", "sqlite", "mysql"] as const;

const run = promisify(execFile);

/** The three at once: most of each is the CLI starting up. */
export async function generatePrismaClients(): Promise<void> {
  await Promise.all(
    PRISMA_PROVIDERS.map(async (provider) => {
      const schema = join(root, "prisma", `${provider}.prisma`);
      const client = join(root, "generated", provider, "client.ts");
      if (existsSync(client) && statSync(client).mtimeMs > statSync(schema).mtimeMs) return;
      await run(join(root, "node_modules", ".bin", "prisma"), ["generate", "--schema", schema], {
        cwd: root,
        // `prisma generate` needs no schema engine (that is migrate's), yet the CLI fetches one
        // at start-up unless told where it is; pointing at any file keeps it off the network.
        env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: "1" },
      });
      readFileSync(client); // fails loudly when the generator wrote nothing
    }),
  );
}

export default function setup(): Promise<void> {
  return generatePrismaClients();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await generatePrismaClients();
