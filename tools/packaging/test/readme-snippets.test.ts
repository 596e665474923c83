// Every ```ts block of the READMEs and docs pages (src/snippets.ts, READMES) is type-checked
// against the packages as built (issue 16.5). A block is an excerpt: the names it takes from the
// reader's app (`app`, `sendInvoice`, `db` …) are not declared, and "cannot find name" is all
// that is forgiven; a call with the wrong options, a misspelt export, a wrong payload type all
// fail. A line marked `// type error` in the README must be one.
// A block that declares every name it uses is a whole program, and is also run: against a
// fresh, migrated SQLite database (DATABASE_URL), it must exit 0 by itself. An excerpt cannot
// be run as written, so it says what it assumes (issue 34.5): an `// Assumes: …` comment in the
// block names every name it leaves undeclared, and the names it takes from the packages are
// imported — so a block never calls a function that exists nowhere. `<!-- snippet: no-run
// <reason> -->` keeps a whole program from running (it needs a live server, PostgreSQL, a
// secret…); `<!-- snippet: run … -->` blocks have a test of their own below; `<!-- snippet: skip
// <reason> -->` leaves a block out. Reasons are required.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, realpathSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { connect, enqueue, getJob, listSchedules, migrate, triggerSchedule, type JobsDatabase } from "@forge/jobs";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT, SAMPLE_DIR } from "../src/packages.js";
import { asModule, assumptionOf, READMES, snippetName, snippetsOf, unstated, type Snippet } from "../src/snippets.js";

const snippets = READMES.flatMap(snippetsOf);

/** "Cannot find name" (and its variants): what an excerpt leaves to the reader's app. */
const UNDECLARED = new Set([2304, 2552, 2582, 18004]);
/** Nothing else is forgiven, but implicit any in an excerpt's callbacks. */
const FORGIVEN = new Set([...UNDECLARED, 7006, 7031]);

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
  });

  it("a block that shows two files is checked as two modules", () => {
    const parts = snippets.filter((s) => s.readme === "apps/sample/README.md" && s.part !== undefined);
    expect(parts.length).toBeGreaterThanOrEqual(4);
    for (const s of parts) expect(s.code.split("\n")[0], snippetName(s)).toMatch(/^\/\/ .*\(src\//);
  });

  it.each([...checks.keys()].map((s) => [snippetName(s), s] as const))("%s type-checks", (_where, s) => {
    expect(checks.get(s)!.errors.join("\n")).toBe("");
  });

  // Issue 34.5: a block runs as written, or says what it assumes. What "runs" means for each is
  // in notRun() below; an excerpt must name, in its `// Assumes:` comment, every name it uses
  // without declaring it (a function of the reader's, a variable of an earlier block).
  it.each([...checks.keys()].map((s) => [snippetName(s), s] as const))("%s runs, or says what it assumes", (_where, s) => {
    const missing = unstated(checks.get(s)!.undeclared, s.assumes);
    expect(
      missing,
      `uses ${missing.join(", ")} without declaring ${missing.length > 1 ? "them" : "it"}: import it from its package, declare it, or name it in an "// Assumes: …" comment of the block`,
    ).toEqual([]);
  });
});

describe("an excerpt's `// Assumes:` comment", () => {
  it("is read from the block, with the comment lines that go on with it", () => {
    expect(assumptionOf("// Assumes: app, your Fastify app;\n// sendInvoice(id), your code.\nimport x from 'y';")).toBe(
      "app, your Fastify app; sendInvoice(id), your code.",
    );
    expect(assumptionOf("import x from 'y';\n// a comment\nx();")).toBeNull();
  });

  it("must name every undeclared name: a new block that is neither whole nor says so fails", () => {
    expect(unstated(["app", "sendInvoice"], null)).toEqual(["app", "sendInvoice"]);
    expect(unstated(["app", "sendInvoice"], "app, your web framework's app")).toEqual(["sendInvoice"]);
    // A name inside another word does not count: `db` is not said by "dbPool".
    expect(unstated(["db", "$config"], "dbPool, $config")).toEqual(["db"]);
    expect(unstated(["app", "sendInvoice"], "app; sendInvoice(invoiceId), your code")).toEqual([]);
  });

  it("the READMEs have excerpts that say so, and the Five minutes worker and the schedules example declare what they call", () => {
    // Each excerpt is checked above, one test per block; here, that there are such blocks at all.
    expect([...checks.entries()].filter(([s, c]) => c.undeclared.length > 0 && s.assumes !== null).length).toBeGreaterThanOrEqual(20);
    const jobs = [...checks.entries()].filter(([s]) => s.readme === "packages/jobs/README.md");
    const worker = jobs.find(([s]) => s.code.includes("async send_invoice(payload"));
    const schedules = jobs.find(([s]) => s.code.includes("await syncSchedules("));
    for (const found of [worker, schedules]) {
      expect(found).toBeDefined();
      expect(found![1].undeclared, snippetName(found![0])).toEqual([]);
    }
  });
});

/** Why a block that type-checks is not run, or null when it is. */
function notRun(s: Snippet): string | null {
  if (s.mark) return `marked ${s.mark.kind}${s.mark.reason ? `: ${s.mark.reason}` : ""}`;
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

/** tsx's loader, from the sample's folder: how a block runs as TypeScript. */
const loader = pathToFileURL(
  path.join(path.dirname(createRequire(path.join(SAMPLE_DIR, "package.json")).resolve("tsx/package.json")), "dist", "loader.mjs"),
).href;

/**
 * Starts a block as a program, through tsx, in a folder of its own under `app` with a fresh,
 * migrated SQLite database (DATABASE_URL); `db` is that database, open, for the test.
 */
async function startBlock(app: string, s: Snippet): Promise<{ child: ChildProcess; output: () => string; db: JobsDatabase }> {
  const work = await mkdtemp(path.join(app, "run-"));
  const url = `sqlite:${path.join(work, "jobs.db")}`;
  const db = connect(url);
  await migrate({ db });
  const file = path.join(work, "snippet.ts");
  await writeFile(file, asModule(s));
  const child = spawn(process.execPath, ["--import", loader, file], {
    cwd: work,
    env: { ...process.env, DATABASE_URL: url, NODE_OPTIONS: "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  return { child, output: () => output, db };
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

  it.each(runnable.map((s) => [snippetName(s), s] as const))(
    "%s runs and exits 0",
    async (_where, s) => {
      app ??= await appFolder();
      const { child, output, db } = await startBlock(app, s);
      await db.close();
      const code = await new Promise<number | string | null>((resolve) => {
        // A program that does not end by itself (a worker, a server) must say so with no-run.
        const timer = setTimeout(() => (child.kill("SIGKILL"), resolve("still running after 30 s")), 30_000);
        child.once("exit", (exitCode) => (clearTimeout(timer), resolve(exitCode)));
      });
      expect(code, output()).toBe(0);
    },
    40_000,
  );
});

/**
 * The README's workers (issue 34.5): each `<!-- snippet: run … -->` block that calls runWorker
 * is started as written on a fresh SQLite database, given jobs, and must run them to `done` with
 * the functions it declares; then SIGTERM must stop it, exit code 0.
 */
type Wait = (what: string, probe: () => Promise<boolean>) => Promise<void>;

const WORKERS: { name: string; code: string; queued: (db: JobsDatabase, wait: Wait) => Promise<number[]>; results: unknown[] }[] = [
  {
    name: "Five minutes, step 3",
    code: "async send_invoice(payload",
    queued: async (db) => [await enqueue("send_invoice", { invoiceId: "42" }, { db, queue: "mails" })],
    results: [{ sent: true }],
  },
  {
    name: "Schedules",
    code: "await syncSchedules(",
    // The block declares its schedules when it starts: a run of two of them, now.
    queued: async (db, wait) => {
      await wait("the block's three schedules", async () => (await listSchedules({ db })).length === 3);
      return [await triggerSchedule("nightly-report", { db }), await triggerSchedule("digest:org-42", { db })];
    },
    results: [
      { kind: "daily", for: expect.any(String) as unknown },
      { org: 42, for: expect.any(String) as unknown },
    ],
  },
];

/**
 * Polls until `probe` is true (what the worker does is seen in the database only); fails at
 * once, with the program's output, if the program has ended.
 */
async function waitUntil(what: string, probe: () => Promise<boolean>, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await probe())) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`the program ended (${child.exitCode ?? child.signalCode}) before ${what}:\n${output()}`);
    if (Date.now() > deadline) throw new Error(`waited 60 s for ${what}:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("the README's workers run their jobs as written, and stop on SIGTERM", () => {
  let app: string | undefined;
  afterAll(async () => {
    if (app) await rm(app, { recursive: true, force: true });
  });
  it.each(WORKERS)("$name", async ({ code, queued, results }) => {
    const block = snippets.find((s) => s.readme === "packages/jobs/README.md" && s.code.includes(code));
    expect(block?.mark?.kind, `the block with ${code} is marked run`).toBe("run");
    app ??= await appFolder();
    const { child, output, db } = await startBlock(app, block!);
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    const wait: Wait = (what, probe) => waitUntil(what, probe, child, output);
    try {
      const ids = await queued(db, wait);
      await wait(`jobs ${ids.join(", ")} to end`, async () =>
        (await Promise.all(ids.map((id) => getJob(id, { db })))).every((j) => j?.status === "done" || j?.status === "failed"),
      );
      const jobs = await Promise.all(ids.map((id) => getJob(id, { db })));
      expect(
        jobs.map((j) => j?.status),
        jobs.map((j) => j?.lastError ?? "").join("\n") + output(),
      ).toEqual(ids.map(() => "done"));
      expect(jobs.map((j) => j?.result)).toEqual(results);
      child.kill("SIGTERM");
      expect(await exited, output()).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
      await db.close();
    }
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
