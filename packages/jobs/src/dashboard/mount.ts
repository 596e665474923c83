import { resolveDb, type DbLike } from "../core/connect.js";
import { JobsDatabase } from "../core/database.js";

// What createDashboard makes of its options before serving: the database and the mount path.

/**
 * A JobsDatabase from another copy of this module (the CommonJS build bundles each entry
 * point on its own) fails `instanceof`; wrap its executor in this copy's class instead.
 */
export function adopt(db: DbLike): JobsDatabase {
  if (db instanceof JobsDatabase) return db;
  const like = db as Partial<JobsDatabase>;
  if (like && typeof like === "object" && like.executor && like.settings && typeof like.table === "string") {
    // Its read replica too (readUrl), when it has one.
    const replica = typeof like.forReading === "function" ? like.forReading().executor : undefined;
    return new JobsDatabase(like.executor, like.settings, undefined, replica === like.executor ? undefined : replica);
  }
  return resolveDb(db);
}

export function normaliseBasePath(value: string): string {
  if (typeof value !== "string" || !/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(value)) {
    throw new TypeError(`createDashboard: basePath must be a URL path starting with "/", got ${JSON.stringify(value)}`);
  }
  return value.replace(/\/+$/, "");
}
