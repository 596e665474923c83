import type { JobsDatabase } from "./database.js";

/** Anything a public function accepts as `db`. */
export type DbLike = JobsDatabase | object;
