import { readFileSync } from "node:fs";
import path from "node:path";
import { ROOT } from "./packages.js";

/** The Markdown files whose code blocks are checked: every README a user reads, and the docs pages with code. */
export const READMES = [
  "README.md",
  "packages/jobs/README.md",
  "packages/mail/README.md",
  "packages/import-export/README.md",
  "packages/jobs/src/dashboard/README.md",
  "packages/jobs/BACKENDS.md",
  "apps/sample/README.md",
  "docs/running-at-scale.md",
];

export interface Snippet {
  readme: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** 1-based line of the code's first line (after the fence, or where a file's part starts). */
  first: number;
  /** Set when the block shows several files (see FILE_PART): which one, from 1. */
  part?: number;
  code: string;
  /**
   * From an HTML comment on the line before the blank line above the block:
   * `<!-- snippet: run (why/how) -->` is run by a test of its own; `<!-- snippet: no-run <reason> -->`
   * is type-checked but not executed (it needs a live server, another database, a secret…);
   * `<!-- snippet: skip <reason> -->` leaves it out.
   */
  mark: { kind: "run" | "no-run" | "skip"; reason: string } | null;
  /**
   * What an excerpt takes from the reader's app, as the block says it in a comment of its own:
   * `// Assumes: app, your Fastify app; sendInvoice(id), your code.` (following `//` lines go on
   * with it). Null when the block (or this file of it) has none.
   */
  assumes: string | null;
}

const MARK = /^<!--\s*snippet:\s*(run|no-run|skip)\b\s*(.*?)\s*-->$/;
const ASSUMES = /^\s*\/\/\s*Assumes:\s*(.*)$/;

/** The text of a block's `// Assumes:` comment and the comment lines right after it, or null. */
export function assumptionOf(code: string): string | null {
  const lines = code.split("\n");
  const start = lines.findIndex((line) => ASSUMES.test(line));
  if (start < 0) return null;
  const said = [ASSUMES.exec(lines[start]!)![1]!];
  for (let i = start + 1; i < lines.length && /^\s*\/\/(?!.*\((?:src|test)\/)/.test(lines[i]!); i++) said.push(lines[i]!.replace(/^\s*\/\/\s*/, ""));
  return said.join(" ").trim() || null;
}

/** The names a block uses without declaring them that its `// Assumes:` comment does not name. */
export function unstated(undeclared: readonly string[], assumes: string | null): string[] {
  return undeclared.filter((name) => !new RegExp(`(^|[^\\w$])${name.replace(/[$]/g, "\\$")}($|[^\\w$])`).test(assumes ?? ""));
}

/**
 * A comment naming the file that the following lines belong to, e.g. `// worker side
 * (src/handlers.ts, src/worker.ts)`: a block with two of them shows two files, and one module
 * holding both would import the same names twice.
 */
const FILE_PART = /^\/\/ .*\((?:src|test)\/[^)]*\.[cm]?[jt]s\b[^)]*\)/;

export const snippetName = (s: Snippet): string => `${s.readme}:${s.line}${s.part === undefined ? "" : ` (part ${s.part})`}`;

/** Every ```ts / ```js block of a README. */
export function snippetsOf(readme: string): Snippet[] {
  const lines = readFileSync(path.join(ROOT, readme), "utf8").split("\n");
  const found: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    // A block inside a list item is indented: its fence and every line carry the item's indent.
    const open = /^( *)```(ts|typescript|js|javascript)\s*$/.exec(lines[i]!);
    if (!open) {
      const other = /^( *)```/.exec(lines[i]!);
      if (other) for (i++; i < lines.length && !new RegExp(`^${other[1]}\`\`\`\\s*$`).test(lines[i]!); i++); // skip other blocks whole
      continue;
    }
    const indent = open[1]!;
    const close = new RegExp(`^${indent}\`\`\`\\s*$`);
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !close.test(lines[i]!); i++) body.push(lines[i]!.startsWith(indent) ? lines[i]!.slice(indent.length) : lines[i]!.trimStart());
    let above = start - 1;
    while (above >= 0 && lines[above]!.trim() === "") above--;
    const mark = MARK.exec(lines[above]?.trim() ?? "");
    const common = { readme, line: start + 1, mark: mark ? { kind: mark[1] as "run" | "no-run" | "skip", reason: mark[2]!.replace(/^[—–-]\s*/, "") } : null };
    const starts = body.flatMap((text, index) => (FILE_PART.test(text) ? [index] : []));
    if (starts.length < 2) {
      const code = body.join("\n");
      found.push({ ...common, first: start + 2, code, assumes: assumptionOf(code) });
      continue;
    }
    // Lines before the first file comment belong to the first file.
    const bounds = [0, ...starts.slice(1), body.length];
    for (let k = 0; k + 1 < bounds.length; k++) {
      const code = body.slice(bounds[k], bounds[k + 1]).join("\n");
      found.push({ ...common, part: k + 1, first: start + 2 + bounds[k]!, code, assumes: assumptionOf(code) });
    }
  }
  return found;
}

/**
 * The block as a module to type-check: a line the README marks `// type error` must be one
 * (`@ts-expect-error` above it), and `export {}` makes top-level await legal.
 */
export function asModule(snippet: Snippet): string {
  const lines = snippet.code
    .split("\n")
    .flatMap((line) => (/^\s*[^\s/].*\/\/\s*type error\s*$/.test(line) ? ["// @ts-expect-error the README says so", line] : [line]));
  return `${lines.join("\n")}\nexport {};\n`;
}
