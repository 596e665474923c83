import type { ListCondition } from "../reads/list.js";

/**
 * The job list's search box: one text, read as
 *
 * - `42` or `#42`: the job with that id;
 * - `payload.email=a@x.org` (a dotted key path, `payload.user.id=7`): jobs whose payload holds
 *   that value at that key, compared as text (`7` matches the number 7 and the string "7");
 * - `task:send-mail`, `tenant:acme`, `worker:<id>`, `error:timeout`, `id:42`: that field only
 *   (task, tenant and the worker holding the job exact; error text contained, any case);
 * - anything else: jobs whose task or tenant is the text, or whose last error contains it.
 *
 * Every value is bound as a parameter. No index serves these reads: a search scans the jobs the
 * filters leave (queue and status first narrow it).
 */
export type Search =
  | { kind: "id"; id: number }
  | { kind: "task" | "tenant" | "worker"; text: string }
  | { kind: "error" | "text"; text: string }
  | { kind: "payload"; path: string[]; value: string };

/** A search text that cannot be read: the message says what to write instead. */
export class SearchSyntaxError extends Error {}

const KEY = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_SEARCH = 500;
const EXAMPLES = "e.g. 42, task:send-mail, tenant:acme, error:timeout or payload.email=a@example.org";

/** The search in `text`, or null for an empty box. */
export function parseSearch(text: string | null | undefined): Search | null {
  const q = (text ?? "").trim();
  if (q === "") return null;
  if (q.length > MAX_SEARCH) throw new SearchSyntaxError(`The search is ${q.length} characters long; at most ${MAX_SEARCH}.`);
  const id = /^(?:#|id:\s*)?(\d+)$/.exec(q);
  if (id) {
    const n = Number(id[1]);
    if (!Number.isSafeInteger(n) || n < 1) throw new SearchSyntaxError(`"${q}" is not a job id: ids are whole numbers from 1.`);
    return { kind: "id", id: n };
  }
  if (/^id:/i.test(q)) throw new SearchSyntaxError(`"${q}": id: takes a job id, a whole number (id:42).`);
  if (/^payload\b/i.test(q)) return parsePayload(q);
  const field = /^(task|tenant|worker|error):(.*)$/is.exec(q);
  if (field) {
    const value = field[2]!.trim();
    const kind = field[1]!.toLowerCase() as "task" | "tenant" | "worker" | "error";
    if (value === "") throw new SearchSyntaxError(`"${q}": give a value after ${kind}: (${EXAMPLES}).`);
    return { kind, text: value };
  }
  return { kind: "text", text: q };
}

function parsePayload(q: string): Search {
  const match = /^payload\.([^=]*)=(.*)$/is.exec(q);
  if (!match) throw new SearchSyntaxError(`"${q}": a payload search is payload.<key>=<value>, e.g. payload.email=a@example.org.`);
  const path = match[1]!.trim().split(".");
  const bad = path.find((key) => !KEY.test(key));
  if (bad !== undefined) {
    throw new SearchSyntaxError(
      `"${q}": ${bad === "" ? "a key is empty" : `the key ${JSON.stringify(bad)} has characters other than letters, digits, _ and -`}; write payload.user.email=a@example.org.`,
    );
  }
  return { kind: "payload", path, value: match[2]!.trim() };
}

/** `text` as a LIKE pattern that matches it anywhere, its own % and _ taken literally (escape character !). */
function containing(text: string): string {
  return `%${text.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`;
}

/** The search as a condition of listJobsWhere, per dialect: JSON read with jsonb operators, json_extract or JSON_EXTRACT. */
export function searchCondition(search: Search): ListCondition {
  switch (search.kind) {
    case "id":
      return (bind) => `id = ${bind(search.id)}`;
    case "task":
    case "tenant":
      return (bind) => `${search.kind} = ${bind(search.text)}`;
    case "worker":
      return (bind) => `locked_by = ${bind(search.text)}`;
    case "error":
      return (bind) => `LOWER(last_error) LIKE ${bind(containing(search.text))} ESCAPE '!'`;
    case "text":
      return (bind) => `task = ${bind(search.text)} OR tenant = ${bind(search.text)} OR LOWER(last_error) LIKE ${bind(containing(search.text))} ESCAPE '!'`;
    case "payload":
      return (bind, db) => {
        const value = bind(search.value);
        if (db.dialect === "postgres") return `payload #>> ${bind(search.path)}::text[] = ${value}`;
        const path = bind(`$${search.path.map((key) => `."${key}"`).join("")}`);
        if (db.dialect === "mysql") return `JSON_UNQUOTE(JSON_EXTRACT(payload, ${path})) = ${value}`;
        // json_extract gives SQLite's own values (true as 1): true and false are spelled as the other backends do.
        return `(CASE json_type(payload, ${path}) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST(json_extract(payload, ${path}) AS TEXT) END) = ${value}`;
      };
  }
}

/**
 * The search box's text read: its search (null for none), or the message saying what is wrong
 * with it. `sealed`: the database seals payloads and errors (payloadCodec), which SQL cannot
 * look inside.
 */
export function readSearch(text: string, sealed = false): { search: Search | null } | { error: string } {
  try {
    const search = parseSearch(text);
    if (sealed && (search?.kind === "payload" || search?.kind === "error")) {
      return {
        error: `"${text}": payloads and errors are encrypted in this database (payloadCodec), so the database cannot search inside them; search by id, task:, tenant: or worker:.`,
      };
    }
    return { search };
  } catch (error) {
    if (error instanceof SearchSyntaxError) return { error: error.message };
    throw error;
  }
}
