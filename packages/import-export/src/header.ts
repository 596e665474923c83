/**
 * The columns an importer expects, checked on the header before any row is read: a file
 * without them is the wrong file, not a file of invalid rows, so the job fails at once.
 */
export interface HeaderSpec {
  /** Columns every file must have. */
  required?: readonly string[];
  /** Columns a file may have; they are renamed like required ones. */
  optional?: readonly string[];
  /** Other spellings accepted for a column: `{ email: ["E-mail address", "Mail"] }`. */
  aliases?: Readonly<Record<string, readonly string[]>>;
}

export type HeaderMatch = { ok: true; columns: string[] } | { ok: false; message: string };

/** Case, spaces, `-`, `_` and `.` do not matter: `E-mail`, `email` and `EMAIL ` are one column. */
export function normalizeColumn(name: string): string {
  return name
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[\s_.-]+/g, "");
}

function quoted(names: readonly string[]): string {
  return names.length === 0 ? "nothing" : names.map((n) => JSON.stringify(n)).join(", ");
}

function byNormalizedName(spec: HeaderSpec): Map<string, string> {
  const names = new Map<string, string>();
  const known = [...(spec.required ?? []), ...(spec.optional ?? [])];
  for (const column of known) names.set(normalizeColumn(column), column);
  for (const [column, aliases] of Object.entries(spec.aliases ?? {})) {
    names.set(normalizeColumn(column), column);
    for (const alias of aliases) names.set(normalizeColumn(alias), column);
  }
  return names;
}

/**
 * Renames the file's columns to the importer's names. Columns the importer does not know
 * keep their own name (validate may still read them). Refuses a header that lacks a
 * required column, or in which two columns stand for the same one.
 */
export function matchHeader(found: readonly string[], spec: HeaderSpec | undefined): HeaderMatch {
  if (spec === undefined) return { ok: true, columns: [...found] };
  const names = byNormalizedName(spec);
  const columns = found.map((name) => names.get(normalizeColumn(name)) ?? name);
  const seen = new Map<string, string>();
  for (const [i, column] of columns.entries()) {
    const earlier = seen.get(column);
    if (earlier !== undefined) {
      return { ok: false, message: `the header has two columns for "${column}": ${quoted([earlier, found[i]!])}` };
    }
    seen.set(column, found[i]!);
  }
  const required = spec.required ?? [];
  const missing = required.filter((column) => !seen.has(column));
  if (missing.length > 0) {
    const optional = spec.optional?.length ? ` (optional: ${spec.optional.join(", ")})` : "";
    return {
      ok: false,
      message: `the header lacks the required column${missing.length === 1 ? "" : "s"} ${quoted(missing)}: expected ${required.join(", ")}${optional}; found ${quoted(found)}`,
    };
  }
  return { ok: true, columns };
}
