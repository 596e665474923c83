import pg from "pg";
import { sleep } from "../lib/stats.js";

/** A pressure applied to one database for a phase; `end` lifts it and says what it did. */
export interface Pressure {
  end(): Promise<string>;
}

/**
 * (a) An idle transaction holding an XID: `BEGIN; SELECT txid_current()` on its own connection,
 * left open, as the public harness's idle-in-tx phase. No row version newer than it can be
 * vacuumed away in this database while it is open.
 */
export async function holdXid(url: string): Promise<Pressure> {
  const client = new pg.Client({ connectionString: url, application_name: "pressure idle xid" });
  await client.connect();
  await client.query("BEGIN");
  const xid = (await client.query<{ xid: string }>("SELECT txid_current() AS xid")).rows[0]!.xid;
  return {
    async end() {
      await client.query("ROLLBACK");
      await client.end();
      return `held xid ${xid}`;
    },
  };
}

/**
 * (b) `count` REPEATABLE READ readers, each one transaction for the whole phase (its snapshot
 * pins the horizon as the idle transaction does), scanning `tables` with count(*) every 100 ms as
 * the public harness's active-readers phase. Errors are counted, not fatal, as there.
 */
export async function startReaders(url: string, tables: string[], count: number): Promise<Pressure> {
  let stopping = false;
  let scans = 0;
  let errors = 0;
  const clients = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const client = new pg.Client({ connectionString: url, application_name: `pressure reader ${i}` });
      await client.connect();
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      return client;
    }),
  );
  const loops = clients.map(async (client) => {
    while (!stopping) {
      for (const table of tables) {
        try {
          await client.query(`SELECT count(*) FROM ${table}`);
          scans++;
        } catch {
          errors++;
        }
      }
      await sleep(100);
    }
    await client.query("ROLLBACK").catch(() => undefined);
    await client.end();
  });
  return {
    async end() {
      stopping = true;
      await Promise.all(loops);
      return `${count} readers, ${scans} scans${errors ? `, ${errors} failed` : ""}`;
    },
  };
}
