import type pg from "pg";
import type { ForgeAdmin } from "./forge.js";

export function pgForgeAdmin(admin: pg.Client): ForgeAdmin {
  return {
    reset: async (table) => {
      await admin.query(`TRUNCATE ${table} RESTART IDENTITY`);
    },
    // Two counts, each on its partial index, so a table full of done rows is not scanned.
    unfinished: async (table) => {
      const { rows } = await admin.query<{ n: string }>(
        `SELECT (SELECT count(*) FROM ${table} WHERE status = 'pending') + (SELECT count(*) FROM ${table} WHERE status = 'running') AS n`,
      );
      return Number(rows[0]!.n);
    },
  };
}
