import { finishedIn, type Dialect } from "./dialect.js";

export const postgres: Dialect = {
  name: "postgres",
  now: "now()",
  nowPlus: (seconds, sign = "+") => `(now() ${sign} make_interval(secs => ${seconds}))`,
  newToken: "gen_random_uuid()",
  returning: true,
  skipLocked: true,
  readyOrder: "priority DESC, id",
  due: "due",
  notDue: "NOT due",
  boolean: (value) => value,
  localClock: false,
  inList: (column, parameter) => `${column} = ANY(${parameter})`,
  concat: (parts) => parts.join(" || "),
  isoTimestamp: (column) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
  // Cheaper to read than a timestamp through pg's text parser (see the claim in claim.ts).
  epochMs: (column) => `(extract(epoch FROM ${column}) * 1000)::float8`,
  // pg parses jsonb itself: a JSON string arrives as a JS string and must not be parsed again.
  readJson: (value) => value ?? null,
  finished: finishedIn,
  mariadb: null,
};
