// Every ```ts block of the READMEs and docs pages (src/snippets.ts, READMES) is type-checked
// against the packages as built (issue 16.5). A block is an excerpt: the names it takes from the
// reader's app (`app`, `sendInvoice`, `db` …) are not declared, and "cannot find name" is all
// that is forgiven; a call with the wrong options, a misspelt export, a wrong payload type all
// fail. A line marked `// type error` in the README must be one.
// A block that declares every name it uses is a whole program, and is also run: against a
// fresh, migrated SQLite database (DATABASE_URL), it must exit 0 by itself. An excerpt cannot
// be run as written, so it is type-checked only. `<!-- snippet: no-run <reason> -->` keeps a
// whole program from running (it needs a live server, PostgreSQL, a secret…);
// `<!-- snippet: run … -->` blocks have a test of their own below; `<!-- snippet: skip <reason> -->`
// leaves a block out. Reasons are required.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, realpathSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { connect, enqueue, getJob, migrate } from "@forge/jobs";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT, SAMPLE_DIR } from "../src/packages.js";
import { asModule, READMES, snippetName, snippetsOf, type Snippet } from "../src/snippets.js";

const snippets = READMES.flatMap(snippetsOf);

/** "Cannot find name" (and its variants): what an excerpt leaves to the reader's app. */
const UNDECLARED = new Set([2304, 2552, 2582, 18004]);
/** Nothing else is forgiven, but implicit any in an excerpt's callbacks. */
const FORGIVEN = new Set([...UNDECLARED, 7006, 7031]);

/**
 * Whole programs that are not run, in Markdown files this test's owners do not edit: the same
 * as a `<!-- snippet: no-run <reason> -->` mark, and to be moved into one. Found by a part of
 * the block's code, so that edits elsewhere in the file do not move them.
 */
const NOT_RUN: { readme: string; code: string; reason: string }[] = [
  {
    readme: "packages/mail/README.md",
    code: 'import { MAIL_JOB_TASK, createMailHandler } from "@forge/mail";\n\nawait runWorker({',
    reason: "a worker that runs until stopped, sending through the SMTP server of SMTP_URL",
  },
  {
    readme: "packages/mail/README.md",
    code: "const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });",
    reason: "the suppression list's PostgreSQL table, through pg",
  },
  {
    readme: "packages/mail/README.md",
    code: "process.env.UNSUBSCRIBE_SECRET!",
    reason: "needs UNSUBSCRIBE_SECRET, a secret of 32+ characters, from the environment",
  },
  {
    readme: "packages/mail/README.md",
    code: 'readFileSync("/run/secrets/dkim.pem"',
    reason: "reads a DKIM private key from /run/secrets",
  },
];

/**
 * Where a README's blocks resolve modules: its package's folder (its own dependencies), the
 * sample app (all three packages, Fastify), then Fastify's own folder (pino, its logger).
 */
function resolutionDirs(readme: string): string[] {
  return [path.join(ROOT, path.dirname(readme)), SAMPLE_DIR, realpathSync(path.join(SAMPLE_DIR, "node_modules", "fastify"))];
}

const virtualPath = (s: Snippet) => path.join(ROOT, path.dirname(s.readme), `.readme-snippet-${s.line}-${s.part ?? 0}.ts`);

interface Checked {
  errors: string[];
  /** Names the block uses without declaring them: an excerpt, not a program. */
  undeclared: string[];
}

function typeCheck(): Map<Snippet, Checked> {
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
  const results = new Map<Snippet, Checked>();
  for (const s of checked) {
    const diagnostics = ts.getPreEmitDiagnostics(program, program.getSourceFile(virtualPath(s)));
    results.set(s, {
      errors: diagnostics
        .filter((d) => !FORGIVEN.has(d.code))
        .map((d) => {
          const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
          return `line ${s.first + line}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`;
        }),
      undeclared: [
        ...new Set(diagnostics.filter((d) => UNDECLARED.has(d.code)).map((d) => d.file!.text.slice(d.start ?? 0, (d.start ?? 0) + (d.length ?? 0)))),
      ],
    });
  }
  return results;
}

const checks = typeCheck();

describe("the READMEs' code blocks", () => {
  it("there are blocks to check in every file, and every skipped or unrun one says why", () => {
    expect(snippets.length).toBeGreaterThanOrEqual(50);
    for (const readme of READMES.filter((r) => r !== "README.md"))
      expect(
        snippets.some((s) => s.readme === readme),
        readme,
      ).toBe(true);
    for (const s of snippets.filter((x) => x.mark?.kind === "skip" || x.mark?.kind === "no-run"))
      expect(s.mark!.reason.length, snippetName(s)).toBeGreaterThan(10);
    for (const entry of NOT_RUN)
      expect(
        snippets.filter((s) => s.readme === entry.readme && s.code.includes(entry.code)),
        entry.code,
      ).toHaveLength(1);
  });

  it("a block that shows two files is checked as two modules", () => {
    const parts = snippets.filter((s) => s.readme === "apps/sample/README.md" && s.part !== undefined);
    expect(parts.length).toBeGreaterThanOrEqual(4);
    for (const s of parts) expect(s.code.split("\n")[0], snippetName(s)).toMatch(/^\/\/ .*\(src\//);
  });

  it.each([...checks.keys()].map((s) => [snippetName(s), s] as const))("%s type-checks", (_where, s) => {
    expect(checks.get(s)!.errors.join("\n")).toBe("");
  });
});

/** Why a block that type-checks is not run, or null when it is. */
function notRun(s: Snippet): string | null {
  if (s.mark) return `marked ${s.mark.kind}${s.mark.reason ? `: ${s.mark.reason}` : ""}`;
  const listed = NOT_RUN.find((n) => n.readme === s.readme && s.code.includes(n.code));
  if (listed) return `listed in NOT_RUN: ${listed.reason}`;
  const undeclared = checks.get(s)?.undeclared ?? [];
  return undeclared.length > 0 ? `an excerpt: uses ${undeclared.join(", ")} from the reader's app` : null;
}

const runnable = [...checks.keys()].filter((s) => notRun(s) === null);

/**
 * A temporary app folder whose node_modules has what the blocks import: the sample's (the three
 * packages, Fastify, tsx) and the ORM conformance tests' (Kysely, Drizzle, Knex, TypeORM, mysql2).
 */
async function appFolder(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "forge-readme-run-"));
  // An ES module, as the READMEs' top-level awaits assume.
  await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: "readme-snippets", private: true, type: "module" }));
  for (const source of [path.join(SAMPLE_DIR, "node_modules"), path.join(ROOT, "tools", "orm-tests", "node_modules")]) {
    for (const entry of readdirSync(source)) {
      if (entry.startsWith(".")) continue;
      const scoped = entry.startsWith("@");
      for (const name of scoped ? readdirSync(path.join(source, entry)).map((n) => `${entry}/${n}`) : [entry]) {
        const target = path.join(dir, "node_modules", name);
        if (existsSync(target)) continue;
        await mkdir(path.dirname(target), { recursive: true });
        await symlink(realpathSync(path.join(source, name)), target);
      }
    }
  }
  return dir;
}

describe("the READMEs' whole programs run on a fresh SQLite database", () => {
  let app: string | undefined;
  afterAll(async () => {
    if (app) await rm(app, { recursive: true, force: true });
  });

  it("some blocks are whole programs, and an excerpt is never one", () => {
    expect(runnable.length).toBeGreaterThanOrEqual(8);
    const excerpt = [...checks.keys()].find((s) => s.readme === "packages/jobs/src/dashboard/README.md" && s.code.includes("requireAdmin"));
    expect(excerpt && notRun(excerpt)).toMatch(/^an excerpt: uses .*requireAdmin/);
  });

  const loader = pathToFileURL(
    path.join(path.dirname(createRequire(path.join(SAMPLE_DIR, "package.json")).resolve("tsx/package.json")), "dist", "loader.mjs"),
  ).href;

  it.each(runnable.map((s) => [snippetName(s), s] as const))(
    "%s runs and exits 0",
    async (_where, s) => {
      app ??= await appFolder();
      const work = await mkdtemp(path.join(app, "run-"));
      const url = `sqlite:${path.join(work, "jobs.db")}`;
      const db = connect(url);
      await migrate({ db });
      await db.close();
      const file = path.join(work, "snippet.ts");
      await writeFile(file, asModule(s));
      const child = spawn(process.execPath, ["--import", loader, file], {
        cwd: work,
        env: { ...process.env, DATABASE_URL: url, NODE_OPTIONS: "" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      child.stdout.on("data", (d: Buffer) => (output += d.toString()));
      child.stderr.on("data", (d: Buffer) => (output += d.toString()));
      const code = await new Promise<number | string | null>((resolve) => {
        // A program that does not end by itself (a worker, a server) must say so with no-run.
        const timer = setTimeout(() => (child.kill("SIGKILL"), resolve("still running after 30 s")), 30_000);
        child.once("exit", (exitCode) => (clearTimeout(timer), resolve(exitCode)));
      });
      expect(code, output).toBe(0);
    },
    40_000,
  );
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
