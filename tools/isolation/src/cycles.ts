import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { SOURCE_EXTENSIONS } from "./check.js";

/**
 * The no-import-cycle rule: no workspace source file reaches itself through relative imports.
 * Type-only imports count too. They vanish from the JavaScript, but a cycle of types is still
 * two modules that cannot be understood, moved or tested apart, and it turns into a run-time
 * cycle (with its half-initialised bindings) the day someone imports a value along the same path.
 */

/** One relative reference from a file to another source file of the same tree. */
export interface ImportEdge {
  from: string;
  to: string;
  /** 1-based line of the reference in `from`. */
  line: number;
  /** The reference is erased from the JavaScript (`import type`, `export type`, `import("…")` in a type). */
  typeOnly: boolean;
  specifier: string;
}

/** A chain of files, each importing the next, the last importing the first. */
export interface Cycle {
  edges: ImportEdge[];
}

export interface CycleReport {
  /** The source folders walked. */
  roots: string[];
  files: number;
  edges: number;
  cycles: Cycle[];
}

/** The workspace's members: the folders of packages/, apps/ and tools/ under repoRoot, sorted. */
export function workspaceMembers(repoRoot: string): string[] {
  const members: string[] = [];
  for (const group of ["packages", "apps", "tools"]) {
    const dir = path.join(repoRoot, group);
    if (!fs.existsSync(dir)) continue;
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (entry.isDirectory() && entry.name !== "node_modules") members.push(path.join(dir, entry.name));
    }
  }
  return members;
}

/** The workspace's source folders: packages/*\/src, apps/*\/src and tools/*\/src under repoRoot. */
export function workspaceSourceRoots(repoRoot: string): string[] {
  return workspaceMembers(repoRoot)
    .map((member) => path.join(member, "src"))
    .filter((src) => fs.existsSync(src));
}

/** Every import cycle among the source files of `roots`. */
export function findCycles(roots: readonly string[]): CycleReport {
  const files = roots.flatMap((root) => sourceFiles(path.resolve(root)));
  const known = new Set(files);
  const graph = new Map<string, ImportEdge[]>();
  let edgeCount = 0;
  for (const file of files) {
    const edges = fileEdges(file, known);
    graph.set(file, edges);
    edgeCount += edges.length;
  }
  const cycles = stronglyConnected(files, graph).flatMap((component) => componentCycles(component, graph));
  return { roots: roots.map((root) => path.resolve(root)), files: files.length, edges: edgeCount, cycles };
}

/** `a.ts:3 → b.ts:1 ⇢ a.ts` (→ an import that stays in the JavaScript, ⇢ a type-only one). */
export function formatCycle(cycle: Cycle, cwd = process.cwd()): string {
  const parts = cycle.edges.map((edge) => `${path.relative(cwd, edge.from)}:${edge.line} ${edge.typeOnly ? "⇢" : "→"} `);
  return parts.join("") + path.relative(cwd, cycle.edges[0]!.from);
}

const SKIPPED_DIRS = new Set(["node_modules", "dist", "test", "tests", "__tests__", "fixtures"]);
const TEST_FILE = /\.(test|spec)\.[cm]?[jt]sx?$/;

/** A source folder's files, tests and build output left out. */
export function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory() && !SKIPPED_DIRS.has(entry.name)) files.push(...sourceFiles(full));
    else if (entry.isFile() && SOURCE_EXTENSIONS.some((ext) => entry.name.endsWith(ext)) && !TEST_FILE.test(entry.name)) files.push(full);
  }
  return files;
}

/** The files `./x.js` may name under NodeNext resolution: the TypeScript source first, then the file itself. */
function candidates(target: string): string[] {
  const ext = path.extname(target);
  const stem = target.slice(0, target.length - ext.length);
  switch (ext) {
    case ".js":
      return [`${stem}.ts`, `${stem}.tsx`, `${stem}.d.ts`, target];
    case ".mjs":
      return [`${stem}.mts`, `${stem}.d.mts`, target];
    case ".cjs":
      return [`${stem}.cts`, `${stem}.d.cts`, target];
    case "":
      // extensionless (bundler style) or a folder with an index
      return [...SOURCE_EXTENSIONS.map((e) => `${target}${e}`), ...SOURCE_EXTENSIONS.map((e) => path.join(target, `index${e}`))];
    default:
      return [target];
  }
}

function resolveRelative(fromFile: string, specifier: string, known: Set<string>): string | undefined {
  if (!/^\.\.?(\/|$)/.test(specifier)) return undefined;
  const target = path.resolve(path.dirname(fromFile), specifier);
  return candidates(target).find((file) => known.has(file));
}

function scriptKind(file: string): ts.ScriptKind {
  if (file.endsWith(".tsx")) return ts.ScriptKind.TSX;
  return /\.[cm]?js$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
}

/** The relative references of one file that land on another file of the tree. */
export function fileEdges(file: string, known: Set<string>): ImportEdge[] {
  const kind = scriptKind(file);
  const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true, kind);
  const edges: ImportEdge[] = [];
  const add = (node: ts.Node | undefined, typeOnly: boolean): void => {
    if (!node || !ts.isStringLiteralLike(node)) return;
    const to = resolveRelative(file, node.text, known);
    if (to === undefined) return;
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    edges.push({ from: file, to, line, typeOnly, specifier: node.text });
  };
  for (const ref of source.referencedFiles) {
    const to = resolveRelative(file, ref.fileName.startsWith(".") ? ref.fileName : `./${ref.fileName}`, known);
    const line = source.getLineAndCharacterOfPosition(ref.pos).line + 1;
    if (to !== undefined) edges.push({ from: file, to, line, typeOnly: true, specifier: ref.fileName });
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node.moduleSpecifier, isTypeOnlyImport(node));
    else if (ts.isExportDeclaration(node)) add(node.moduleSpecifier, node.isTypeOnly || isTypeOnlyExport(node));
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node.moduleReference.expression, node.isTypeOnly);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, true);
    else if (ts.isJSDocImportTag(node)) add(node.moduleSpecifier, true);
    else if (ts.isModuleDeclaration(node) && ts.isStringLiteral(node.name)) add(node.name, true);
    else if (ts.isCallExpression(node) && isLoadCall(node.expression)) add(node.arguments[0], false);
    if (kind === ts.ScriptKind.JS) for (const doc of (node as { jsDoc?: ts.JSDoc[] }).jsDoc ?? []) visit(doc);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return edges;
}

/** `import type { A }`, or `import { type A, type B }` (nothing of it stays in the JavaScript). */
function isTypeOnlyImport(node: ts.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (!clause) return false;
  if (clause.isTypeOnly) return true;
  const bindings = clause.namedBindings;
  return !clause.name && bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

function isTypeOnlyExport(node: ts.ExportDeclaration): boolean {
  const clause = node.exportClause;
  return clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((e) => e.isTypeOnly);
}

/** `import(…)`, `require(…)`, `require.resolve(…)`. */
function isLoadCall(callee: ts.Expression): boolean {
  if (callee.kind === ts.SyntaxKind.ImportKeyword) return true;
  if (ts.isIdentifier(callee)) return callee.text === "require";
  return ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) && callee.expression.text === "require" && callee.name.text === "resolve";
}

/** Tarjan's algorithm, iterative (a long import chain must not overflow the stack); components that hold a cycle only. */
function stronglyConnected(files: readonly string[], graph: Map<string, ImportEdge[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let next = 0;
  for (const start of files) {
    if (index.has(start)) continue;
    const work: [string, number][] = [[start, 0]];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const [node, i] = frame;
      const edges = graph.get(node) ?? [];
      if (i < edges.length) {
        frame[1] = i + 1;
        const to = edges[i]!.to;
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next++);
          stack.push(to);
          onStack.add(to);
          work.push([to, 0]);
        } else if (onStack.has(to)) {
          low.set(node, Math.min(low.get(node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent[0], Math.min(low.get(parent[0])!, low.get(node)!));
      if (low.get(node) !== index.get(node)) continue;
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      const selfLoop = edges.some((edge) => edge.to === node);
      if (component.length > 1 || selfLoop) components.push(component.sort());
    }
  }
  return components.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/**
 * Cycles that together pass through every file of a component: for each file, in order, the
 * shortest way back to itself, unless a cycle already reported passes through it. A component
 * can hold exponentially many cycles; these are enough to show every file involved, and
 * breaking them exposes any that remain.
 */
function componentCycles(component: readonly string[], graph: Map<string, ImportEdge[]>): Cycle[] {
  const members = new Set(component);
  const covered = new Set<string>();
  const cycles: Cycle[] = [];
  for (const start of component) {
    if (covered.has(start)) continue;
    const edges = shortestCycle(start, members, graph);
    if (!edges) continue;
    for (const edge of edges) covered.add(edge.from);
    cycles.push({ edges });
  }
  return cycles;
}

/** Breadth-first from `start` back to itself, staying inside the component. */
function shortestCycle(start: string, members: Set<string>, graph: Map<string, ImportEdge[]>): ImportEdge[] | undefined {
  const via = new Map<string, ImportEdge>();
  let frontier = [start];
  while (frontier.length > 0) {
    const following: string[] = [];
    for (const node of frontier) {
      for (const edge of graph.get(node) ?? []) {
        if (!members.has(edge.to)) continue;
        if (edge.to === start) {
          const chain = [edge];
          for (let at = node; at !== start; at = via.get(at)!.from) chain.unshift(via.get(at)!);
          return chain;
        }
        if (via.has(edge.to)) continue;
        via.set(edge.to, edge);
        following.push(edge.to);
      }
    }
    frontier = following;
  }
  return undefined;
}
