// Every ```ts block of the root README and of each package's README is type-checked against the
// packages as built (issue 16.5). A block is an excerpt: the names it takes from the reader's
// app (`app`, `sendInvoice`, `db` …) are not declared, and "cannot find name" is all that is
// forgiven; a call with the wrong options, a misspelt export, a wrong payload type all fail.
// A line marked `// type error` in the README must be one. `<!-- snippet: run … -->` blocks are
// also run; `<!-- snippet: skip <reason> -->` leaves a block out, and the reason is required.
import { spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { connect, enqueue, getJob, migrate } from "@forge/jobs";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT, SAMPLE_DIR } from "../src/packages.js";
import { asModule, READMES, snippetsOf, type Snippet } from "../src/snippets.js";

const snippets = READMES.flatMap(snippetsOf);

/** "Cannot find name": what an excerpt leaves to the reader's app. Nothing else is forgiven, but implicit any in its callbacks. */
const FORGIVEN = new Set([2304, 2552, 2582, 18004, 7006, 7031]);

/**
 * Where a README's blocks resolve modules: its package's folder (its own dependencies), the
 * sample app (all three packages, Fastify), then Fastify's own folder (pino, its logger).
 */
function resolutionDirs(readme: string): string[] {
  return [path.join(ROOT, path.dirname(readme)), SAMPLE_DIR, realpathSync(path.join(SAMPLE_DIR, "node_modules", "fastify"))];
}

const virtualPath = (s: Snippet) => path.join(ROOT, path.dirname(s.readme), `.readme-snippet-${s.line}.ts`);

function typeErrors(): Map<Snippet, string[]> {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ["lib.es2023.d.ts", "lib.dom.d.ts"],
    strict: true,
    skipLibCheck: true,
    esModuleInterop: true,
    noEmit: true,
    types: ["node"],
    typeRoots: [path.join(SAMPLE_DIR, "node_modules", "@types")],
  };
  const checked = snippets.filter((s) => s.mark?.kind !== "skip");
  const files = new Map(checked.map((s) => [virtualPath(s), asModule(s)]));
  const host = ts.createCompilerHost(options);
  const disk = ts.createCompilerHost(options);
  host.fileExists = (f) => files.has(f) || disk.fileExists(f);
  host.readFile = (f) => files.get(f) ?? disk.readFile(f);
  host.getSourceFile = (f, language, onError, create) =>
    files.has(f) ? ts.createSourceFile(f, files.get(f)!, language, true) : disk.getSourceFile(f, language, onError, create);
  host.resolveModuleNameLiterals = (literals, containing, _redirected, compilerOptions) =>
    literals.map((literal) => {
      const dirs = files.has(containing) ? resolutionDirs(path.relative(ROOT, containing)) : [path.dirname(containing)];
      for (const dir of dirs) {
        const found = ts.resolveModuleName(literal.text, files.has(containing) ? path.join(dir, "x.ts") : containing, compilerOptions, host);
        if (found.resolvedModule) return found;
      }
      return { resolvedModule: undefined };
    });
  const program = ts.createProgram([...files.keys()], options, host);
  const errors = new Map<Snippet, string[]>();
  for (const s of checked) {
    const diagnostics = ts.getPreEmitDiagnostics(program, program.getSourceFile(virtualPath(s)));
    errors.set(
      s,
      diagnostics
        .filter((d) => !FORGIVEN.has(d.code))
        .map((d) => {
          const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
          return `line ${s.line + line}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`;
        }),
    );
  }
  return errors;
}

describe("the READMEs' code blocks", () => {
  it("there are blocks to check, and every skipped one says why", () => {
    expect(snippets.length).toBeGreaterThanOrEqual(15);
    for (const s of snippets.filter((x) => x.mark?.kind === "skip")) expect(s.mark!.reason.length, `${s.readme}:${s.line}`).toBeGreaterThan(10);
  });

  const errors = typeErrors();
  it.each([...errors.keys()].map((s) => [`${s.readme}:${s.line}`, s] as const))("%s type-checks", (_where, s) => {
    expect(errors.get(s)!.join("\n")).toBe("");
  });
});

describe("the README's Fastify dashboard (issue 16.5: its buttons got 415)", () => {
  const fastify = snippets.find((s) => s.mark?.kind === "run" && s.code.includes("createDashboard"));
  let work: string | undefined;
  let file: string | undefined;
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
    if (file) await rm(file, { force: true });
  });

  it("runs as written, and a button's form post reaches the dashboard", async () => {
    expect(fastify, "packages/jobs/README.md has a `<!-- snippet: run -->` Fastify block").toBeDefined();
    work = await mkdtemp(path.join(tmpdir(), "forge-readme-fastify-"));
    const url = `sqlite:${path.join(work, "jobs.db")}`;
    const db = connect(url);
    await migrate({ db });
    const id = await enqueue("readme.task", { n: 1 }, { db });
    // In the sample's folder: it has Fastify and the packages, as the reader's app would.
    await mkdir(path.join(SAMPLE_DIR, ".readme-snippets"), { recursive: true });
    file = path.join(SAMPLE_DIR, ".readme-snippets", `fastify-${process.pid}.ts`);
    await writeFile(file, fastify!.code);
    const child = spawn(process.execPath, ["--import", "tsx", file], {
      cwd: SAMPLE_DIR,
      env: { ...process.env, DATABASE_URL: url, PORT: "0", ADMIN_TOKEN: "readme-token" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    try {
      const base = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the snippet did not listen in 30 s:\n${output}`)), 30_000);
        const poll = setInterval(() => {
          const found = /Server listening at (http:\/\/[^"\s]+)/.exec(output)?.[1];
          if (!found) return;
          clearInterval(poll);
          clearTimeout(timer);
          resolve(found);
        }, 50);
        child.once("exit", (code) => (clearInterval(poll), clearTimeout(timer), reject(new Error(`the snippet exited (${code}):\n${output}`))));
      });
      const auth = { authorization: "Bearer readme-token" };
      expect((await fetch(`${base}/admin/jobs`)).status).toBe(401);
      const page = await fetch(`${base}/admin/jobs`, { headers: auth });
      expect(page.status).toBe(200);
      const html = await page.text();
      const cookie = page.headers
        .getSetCookie()
        .map((c) => c.split(";")[0])
        .join("; ");
      const action = new RegExp(`<form method="post" action="([^"]*/jobs/${id}/cancel[^"]*)"><input type="hidden" name="csrf" value="([^"]+)"`).exec(html);
      expect(action, "the page shows the pending job's Cancel button").not.toBeNull();
      const pressed = await fetch(`${base}${action![1]!.replace(/&amp;/g, "&")}`, {
        method: "POST",
        redirect: "manual",
        headers: { ...auth, cookie, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ csrf: action![2]! }).toString(),
      });
      expect(pressed.status, await pressed.clone().text()).not.toBe(415);
      expect(pressed.status).toBeLessThan(400);
      expect((await getJob(id, { db }))?.status).toBe("cancelled");
    } finally {
      child.kill("SIGTERM");
      await db.close();
    }
  });
});

// The README's block must be what runs: not a copy kept in this file.
it("the run block is read from the README at test time", async () => {
  expect(await readFile(path.join(ROOT, "packages/jobs/README.md"), "utf8")).toContain("admin.addContentTypeParser(");
});
