import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** How a file (or package.json) refers to something outside its package. */
export type Form =
  | "import"
  | "import-type"
  | "import-side-effect"
  | "export-from"
  | "export-star"
  | "export-type"
  | "dynamic-import"
  | "require"
  | "require-resolve"
  | "import-meta-resolve"
  | "import-equals"
  | "import-type-node"
  | "declare-module"
  | "reference-path"
  | "reference-types"
  | "jsdoc-import"
  | "module-name"
  | "code-string"
  | "symlink"
  | "package.json"
  | DependencyField;

export type DependencyField = (typeof DEPENDENCY_FIELDS)[number];

export interface Violation {
  /** Absolute path of the offending file. */
  file: string;
  /** 1-based. */
  line: number;
  /** 1-based. */
  column: number;
  form: Form;
  /** The module specifier, path or dependency as written (source text when it is not a literal). */
  specifier: string;
  message: string;
}

export interface CheckOptions {
  /** The folder whose sub-folders are the packages (the repo's packages/). */
  packagesDir: string;
}

export interface PackageInfo {
  dir: string;
  /** package.json "name"; undefined when missing or unreadable. */
  name: string | undefined;
  /** Source files parsed. */
  files: number;
}

export interface IsolationReport {
  packages: PackageInfo[];
  files: number;
  violations: Violation[];
}

export const SOURCE_EXTENSIONS = [".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs"] as const;
export const DEPENDENCY_FIELDS = ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"] as const;
const SKIPPED_DIRS = new Set(["node_modules", "dist"]);
const SCOPE = "@forge";

/** Every cross-package reference in every package under packagesDir. */
export function checkIsolation(options: CheckOptions): Violation[] {
  return scanIsolation(options).violations;
}

/** checkIsolation, plus what was scanned (for the CLI summary and sanity checks). */
export function scanIsolation({ packagesDir }: CheckOptions): IsolationReport {
  const root = path.resolve(packagesDir);
  if (!fs.statSync(root).isDirectory()) throw new Error(`isolation: ${root} is not a directory`);
  const packages: PackageInfo[] = [];
  const violations: Violation[] = [];
  const folders = fs
    .readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !SKIPPED_DIRS.has(entry.name))
    .map((entry) => entry.name)
    .sort();
  for (const folder of folders) {
    const scope = readPackage(path.join(root, folder), violations);
    const files = walk(scope.root, scope, violations);
    for (const file of files) checkSourceFile(file, scope, violations);
    packages.push({ dir: scope.root, name: scope.name, files: files.length });
  }
  violations.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.column - b.column);
  return { packages, files: packages.reduce((n, p) => n + p.files, 0), violations };
}

/** One package being checked: its folder and its own name (which it may always use). */
interface Scope {
  root: string;
  name: string | undefined;
}

/** Why `specifier`, written in a file of `fromDir`, leaves the package; undefined when it does not. */
function judgeSpecifier(scope: Scope, fromDir: string, specifier: string): string | undefined {
  if (specifier === SCOPE || specifier.startsWith(`${SCOPE}/`)) {
    const own = scope.name !== undefined && (specifier === scope.name || specifier.startsWith(`${scope.name}/`));
    if (own) return undefined;
    const target = specifier.split("/").slice(0, 2).join("/");
    return `references another package (${target}); packages must not depend on each other, share the structural protocol instead`;
  }
  if (specifier.startsWith("file:")) {
    let file: string;
    try {
      file = fileURLToPath(specifier);
    } catch {
      return "file: URL cannot be checked; use a path relative to the file";
    }
    return judgePath(scope, fromDir, file);
  }
  const isPath = specifier === "." || specifier === ".." || /^\.\.?\//.test(specifier) || path.isAbsolute(specifier);
  return isPath ? judgePath(scope, fromDir, specifier) : undefined;
}

/** Why a file-system path leaves the package root; undefined when it stays inside. */
function judgePath(scope: Scope, fromDir: string, target: string): string | undefined {
  const resolved = path.resolve(fromDir, target);
  if (isInside(scope.root, resolved)) return undefined;
  return `leaves package ${scope.name ?? path.basename(scope.root)} (resolves to ${path.relative(scope.root, resolved)})`;
}

function isInside(root: string, target: string): boolean {
  const rel = path.relative(root, target);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

function position(source: ts.SourceFile, pos: number): { line: number; column: number } {
  const { line, character } = source.getLineAndCharacterOfPosition(pos);
  return { line: line + 1, column: character + 1 };
}

function readPackage(dir: string, violations: Violation[]): Scope {
  const scope: Scope = { root: dir, name: undefined };
  const manifest = path.join(dir, "package.json");
  if (!fs.existsSync(manifest)) return scope;
  const text = fs.readFileSync(manifest, "utf8");
  const json = ts.parseJsonText(manifest, text);
  const report = (node: ts.Node, form: Form, specifier: string, message: string): void => {
    violations.push({ file: manifest, ...position(json, node.getStart(json)), form, specifier, message });
  };
  const top = json.statements[0]?.expression;
  if (!top || !ts.isObjectLiteralExpression(top) || !isJson(text)) {
    report(top ?? json, "package.json", "package.json", "package.json is not a valid JSON object, so the package cannot be checked");
    return scope;
  }
  const fields = objectEntries(top);
  const name = fields.get("name")?.initializer;
  if (name && ts.isStringLiteral(name)) scope.name = name.text;
  for (const field of DEPENDENCY_FIELDS) {
    const deps = fields.get(field)?.initializer;
    if (!deps || !ts.isObjectLiteralExpression(deps)) continue;
    for (const [dependency, property] of objectEntries(deps)) {
      const version = ts.isStringLiteral(property.initializer) ? property.initializer.text : "";
      const byName = judgeSpecifier(scope, dir, dependency);
      const byVersion = byName ? undefined : judgeDependencyValue(scope, version);
      if (byName) report(property, field, dependency, byName);
      if (byVersion) report(property, field, version, `${dependency}: ${byVersion}`);
    }
  }
  return scope;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Property name → property of a JSON object literal. */
function objectEntries(object: ts.ObjectLiteralExpression): Map<string, ts.PropertyAssignment> {
  const entries = new Map<string, ts.PropertyAssignment>();
  for (const property of object.properties) {
    if (ts.isPropertyAssignment(property) && ts.isStringLiteral(property.name)) entries.set(property.name.text, property);
  }
  return entries;
}

/** A dependency version that points at another package: an npm:/workspace: alias or a file:/link: path. */
function judgeDependencyValue(scope: Scope, version: string): string | undefined {
  const alias = /^(?:npm|workspace):(@[^@]+|[^@]+)(?:@.*)?$/.exec(version)?.[1];
  if (alias?.startsWith(`${SCOPE}/`)) return judgeSpecifier(scope, scope.root, alias);
  const local = /^(?:file|link|portal|workspace):(.*)$/.exec(version)?.[1];
  if (local !== undefined && (local.startsWith(".") || path.isAbsolute(local))) return judgePath(scope, scope.root, local);
  return undefined;
}

/** The package's source files, skipping node_modules, dist and test/fixtures; symlinks leaving the package are violations. */
function walk(dir: string, scope: Scope, violations: Violation[]): string[] {
  const files: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(dir, entry.name);
    if (SKIPPED_DIRS.has(entry.name) || (entry.name === "fixtures" && path.basename(dir) === "test")) continue;
    if (entry.isSymbolicLink()) {
      const target = fs.readlinkSync(full);
      let real: string;
      try {
        real = fs.realpathSync(full);
      } catch {
        real = path.resolve(dir, target);
      }
      const reason = judgePath(scope, dir, real);
      if (reason) violations.push({ file: full, line: 1, column: 1, form: "symlink", specifier: target, message: reason });
    } else if (entry.isDirectory()) {
      files.push(...walk(full, scope, violations));
    } else if (entry.isFile() && SOURCE_EXTENSIONS.some((ext) => entry.name.endsWith(ext))) {
      files.push(full);
    }
  }
  return files;
}

function scriptKind(file: string): ts.ScriptKind {
  if (file.endsWith(".tsx")) return ts.ScriptKind.TSX;
  return /\.[cm]?js$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
}

/** Walks one file's syntax tree (and, in JavaScript, its JSDoc) for module references. */
function checkSourceFile(file: string, scope: Scope, violations: Violation[]): void {
  const kind = scriptKind(file);
  const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true, kind);
  const dir = path.dirname(file);
  const seen = new Set<string>();
  const push = (pos: number, form: Form, specifier: string, message: string): void => {
    const key = `${pos}:${form}`;
    if (seen.has(key)) return;
    seen.add(key);
    violations.push({ file, ...position(source, pos), form, specifier, message });
  };
  /** Specifier strings already judged by their form, so the string rules do not report them twice. */
  const judged = new Set<ts.Node>();
  /** A module specifier node: a string literal is judged; anything else cannot be checked. */
  const check = (node: ts.Node | undefined, form: Form, anchor: ts.Node): void => {
    if (node && ts.isStringLiteralLike(node)) {
      judged.add(node);
      const reason = judgeSpecifier(scope, dir, node.text);
      if (reason) push(node.getStart(source), form, node.text, reason);
    } else {
      const text = node ? node.getText(source) : "";
      if (form === "dynamic-import" && !text.includes("@forge/") && allowedDynamic(source, anchor)) return;
      push((node ?? anchor).getStart(source), form, text, "non-literal module specifier cannot be checked; use a string literal");
    }
  };

  for (const ref of source.referencedFiles) {
    const reason = judgePath(scope, dir, ref.fileName);
    if (reason) push(ref.pos, "reference-path", ref.fileName, reason);
  }
  for (const ref of source.typeReferenceDirectives) {
    const reason = judgeSpecifier(scope, dir, ref.fileName);
    if (reason) push(ref.pos, "reference-types", ref.fileName, reason);
  }

  const visit = (node: ts.Node, inJsDoc: boolean): void => {
    const form = referenceForm(node, inJsDoc);
    if (form) check(specifierOf(node), form, node);
    else if (ts.isStringLiteralLike(node) && !judged.has(node)) checkString(node);
    if (kind === ts.ScriptKind.JS) {
      for (const doc of (node as { jsDoc?: ts.JSDoc[] }).jsDoc ?? []) visit(doc, true);
    }
    ts.forEachChild(node, (child) => visit(child, inJsDoc));
  };
  /**
   * A module can be loaded without import/require by name: `createRequire(url)(name)`,
   * `process.mainModule.require(name)`, `new Function("return import('…')")`, `eval(…)`. So a
   * string whose whole value is another package's name (or a subpath) is a reference wherever it
   * appears, and so is code in a string that imports or requires one. Text that merely mentions
   * a package ("see @forge/b") is not.
   */
  const checkString = (node: ts.StringLiteralLike): void => {
    const start = node.getStart(source);
    if (isPackageName(node.text)) {
      const reason = judgeSpecifier(scope, dir, node.text);
      if (reason) push(start, "module-name", node.text, reason);
      return;
    }
    for (const specifier of loadedInCode(node.text)) {
      const reason = judgeSpecifier(scope, dir, specifier);
      if (reason) {
        push(start, "code-string", specifier, `code in a string loads it: ${reason}`);
        return;
      }
    }
  };
  visit(source, false);
}

/** `@forge/x` or `@forge/x/sub/path`, nothing around it. */
function isPackageName(text: string): boolean {
  return new RegExp(`^${SCOPE}/[^\\s/'"\`]+(/[^\\s'"\`]*)?$`).test(text);
}

/** The literal specifiers of `import(…)` and `require(…)` calls written inside a string. */
function loadedInCode(text: string): string[] {
  return [...text.matchAll(/\b(?:import|require)\s*\(\s*(['"`])([^'"`]+)\1/g)].map((m) => m[2] as string);
}

/**
 * The one exemption, for code that must load a module the application names at run time (a CLI
 * loading the app's handlers file): a non-literal `import()` whose statement carries the comment
 * `isolation-allow-dynamic: <why>`. The reason is required, so every exemption is explained
 * where a reviewer reads it; `require()` and anything naming `@forge/` are never exempt.
 */
export const ALLOW_DYNAMIC = /isolation-allow-dynamic:\s*\S.{3,}/;

function allowedDynamic(source: ts.SourceFile, call: ts.Node): boolean {
  let node: ts.Node | undefined = call;
  while (node && !ts.isSourceFile(node)) {
    const comments = [
      ...(ts.getLeadingCommentRanges(source.text, node.getFullStart()) ?? []),
      ...(ts.getTrailingCommentRanges(source.text, node.getEnd()) ?? []),
    ];
    if (comments.some((c) => ALLOW_DYNAMIC.test(source.text.slice(c.pos, c.end)))) return true;
    if (ts.isStatement(node)) return false;
    node = node.parent;
  }
  return false;
}

/** The form of a node that references a module, or undefined. */
function referenceForm(node: ts.Node, inJsDoc: boolean): Form | undefined {
  if (ts.isImportDeclaration(node)) {
    if (!node.importClause) return "import-side-effect";
    return node.importClause.isTypeOnly ? "import-type" : "import";
  }
  if (ts.isExportDeclaration(node) && node.moduleSpecifier) {
    if (node.isTypeOnly) return "export-type";
    return !node.exportClause || ts.isNamespaceExport(node.exportClause) ? "export-star" : "export-from";
  }
  if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) return "import-equals";
  if (ts.isImportTypeNode(node)) return inJsDoc ? "jsdoc-import" : "import-type-node";
  if (ts.isJSDocImportTag(node)) return "jsdoc-import";
  if (ts.isModuleDeclaration(node) && ts.isStringLiteral(node.name)) return "declare-module";
  if (ts.isCallExpression(node)) return callForm(node.expression);
  return undefined;
}

/** import(), require(), module.require(), require.resolve(), import.meta.resolve(). */
function callForm(callee: ts.Expression): Form | undefined {
  if (callee.kind === ts.SyntaxKind.ImportKeyword) return "dynamic-import";
  if (ts.isIdentifier(callee)) return callee.text === "require" ? "require" : undefined;
  if (!ts.isPropertyAccessExpression(callee)) return undefined;
  const owner = callee.expression;
  const method = callee.name.text;
  if (ts.isIdentifier(owner) && owner.text === "require" && method === "resolve") return "require-resolve";
  if (ts.isIdentifier(owner) && owner.text === "module" && method === "require") return "require";
  const importMeta = ts.isMetaProperty(owner) && owner.keywordToken === ts.SyntaxKind.ImportKeyword;
  return importMeta && method === "resolve" ? "import-meta-resolve" : undefined;
}

/** The specifier node of a node referenceForm recognised. */
function specifierOf(node: ts.Node): ts.Node | undefined {
  if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node) || ts.isJSDocImportTag(node)) return node.moduleSpecifier;
  if (ts.isImportEqualsDeclaration(node)) return (node.moduleReference as ts.ExternalModuleReference).expression;
  if (ts.isImportTypeNode(node)) return ts.isLiteralTypeNode(node.argument) ? node.argument.literal : node.argument;
  if (ts.isModuleDeclaration(node)) return node.name;
  if (ts.isCallExpression(node)) return node.arguments[0];
  return undefined;
}
