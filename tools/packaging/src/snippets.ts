import { readFileSync } from "node:fs";
import path from "node:path";
import { ROOT } from "./packages.js";

/** The READMEs whose code blocks are checked: the root one and each package's. */
export const READMES = ["README.md", "packages/jobs/README.md", "packages/mail/README.md", "packages/import-export/README.md"];

export interface Snippet {
  readme: string;
  /** 1-based line of the opening fence. */
  line: number;
  code: string;
  /**
   * From an HTML comment on the line before the blank line above the block:
   * `<!-- snippet: run (why/how) -->` runs it as well; `<!-- snippet: skip <reason> -->` leaves it out.
   */
  mark: { kind: "run" | "skip"; reason: string } | null;
}

const MARK = /^<!--\s*snippet:\s*(run|skip)\b\s*(.*?)\s*-->$/;

/** Every ```ts / ```js block of a README. */
export function snippetsOf(readme: string): Snippet[] {
  const lines = readFileSync(path.join(ROOT, readme), "utf8").split("\n");
  const found: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(ts|typescript|js|javascript)\s*$/.exec(lines[i]!);
    if (!open) {
      if (/^```/.test(lines[i]!)) for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++); // skip other blocks whole
      continue;
    }
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    let above = start - 1;
    while (above >= 0 && lines[above]!.trim() === "") above--;
    const mark = MARK.exec(lines[above]?.trim() ?? "");
    found.push({
      readme,
      line: start + 1,
      code: body.join("\n"),
      mark: mark ? { kind: mark[1] as "run" | "skip", reason: mark[2]!.replace(/^[—–-]\s*/, "") } : null,
    });
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
