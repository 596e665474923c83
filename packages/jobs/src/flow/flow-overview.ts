import type { JobsDatabase } from "../core/database.js";
import { listGroups, type GroupStatus } from "./groups.js";
import { listLimits, type LimitStatus } from "./limits.js";

/** What `forge-jobs status` and the dashboard show of flow control. */
export interface FlowOverview {
  limits: LimitStatus[];
  groups: GroupStatus[];
}

/**
 * Limits and groups for the operator's views; null on a schema older than flow control (its
 * tables are missing), so `status` and the dashboard keep working on a database that has not
 * run the latest migration yet.
 */
export async function flowOverview(db: JobsDatabase): Promise<FlowOverview | null> {
  try {
    return { limits: await listLimits({ db }), groups: await listGroups({ db }) };
  } catch (error) {
    if (isMissingTable(error)) return null;
    throw error;
  }
}

/** PostgreSQL 42P01, MariaDB ER_NO_SUCH_TABLE (1146), SQLite "no such table". */
export function isMissingTable(error: unknown): boolean {
  const { code, errno, message } = (typeof error === "object" && error !== null ? error : {}) as { code?: unknown; errno?: unknown; message?: unknown };
  return code === "42P01" || errno === 1146 || (typeof message === "string" && /no such table/i.test(message));
}
