import pg from "pg";
import type { Importer, JobContextLike } from "../../src/index.js";
import { validatePerson, type Person } from "./people.js";

export const DATABASE_URL = process.env.IMPORT_EXPORT_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/**
 * The queue's side of the structural protocol, played by the test with plain pg: the
 * batch and the cursor commit in one transaction, fenced by the claim token, as
 * @forge/jobs' ctx.checkpoint does.
 */
export function pgJobContext(client: pg.Client, schema: string, jobId: number, claimToken: string, progress: unknown): JobContextLike {
  return {
    job: { id: jobId, task: "forge.import.csv", queue: "default", attempt: 1, maxAttempts: 3 },
    progress,
    heartbeat: async () => true,
    checkpoint: async (next, work) => {
      await client.query("BEGIN");
      try {
        const result: unknown = work ? await work(client) : undefined;
        // As @forge/jobs: progress may be a function of what the work returned.
        const value: unknown = typeof next === "function" ? (next as (r: unknown) => unknown)(result) : next;
        const saved = await client.query(`UPDATE ${schema}.jobs SET progress = $1 WHERE id = $2 AND claim_token = $3`, [
          JSON.stringify(value),
          jobId,
          claimToken,
        ]);
        if (saved.rowCount === 0) {
          await client.query("ROLLBACK");
          return false;
        }
        await client.query("COMMIT");
        return true;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      }
    },
  };
}

/** Plain INSERT, no ON CONFLICT: a row written twice fails the batch on the primary key. */
export function pgPeopleImporter(schema: string, pauseMs = 0): Importer<Person, pg.Client> {
  return {
    validate: validatePerson,
    async writeBatch(values, tx) {
      if (tx === undefined) throw new Error("this importer only runs inside a checkpoint");
      const params: unknown[] = [];
      const rows = values.map((p, i) => {
        params.push(p.id, p.name, p.email, p.note);
        return `($${i * 4 + 1}, $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4})`;
      });
      await tx.query(`INSERT INTO ${schema}.people (id, name, email, note) VALUES ${rows.join(", ")}`, params);
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    },
  };
}

export async function createJobSchema(client: pg.Client, schema: string, claimToken: string): Promise<void> {
  await client.query(`CREATE SCHEMA ${schema}`);
  await client.query(`CREATE TABLE ${schema}.people (id integer PRIMARY KEY, name text NOT NULL, email text NOT NULL UNIQUE, note text NOT NULL)`);
  await client.query(`CREATE TABLE ${schema}.jobs (id integer PRIMARY KEY, claim_token text NOT NULL, progress jsonb)`);
  await client.query(`INSERT INTO ${schema}.jobs (id, claim_token) VALUES (1, $1)`, [claimToken]);
}

export async function readJobProgress(client: pg.Client, schema: string): Promise<Record<string, unknown> | null> {
  const { rows } = await client.query<{ progress: Record<string, unknown> | null }>(`SELECT progress FROM ${schema}.jobs WHERE id = 1`);
  return rows[0]?.progress ?? null;
}
