import { pathToFileURL } from "node:url";
import type * as Jobs from "../../packages/jobs/src/index.ts";

export type Forge = typeof Jobs;

/**
 * @forge/jobs as users run it: the built package (`pnpm bench` builds it first, so it is what the
 * work tree holds). BENCH_FORGE_ENTRY=src imports its TypeScript source through tsx instead (no
 * build step), which costs CPU a user does not pay: tsx's transform keeps function names by
 * wrapping every closure as it is created. BENCH_FORGE_ENTRY=/abs/path/dist/index.js imports a
 * build of another commit (a copy outside the tree, see BENCHMARKS.md "Storage per job: probes"),
 * so a design can be measured while the tree's own build is changing under it.
 */
const entry = process.env.BENCH_FORGE_ENTRY;
const fromSource = entry === "src";
const fromPath = entry !== undefined && entry.startsWith("/");
let loaded: Promise<Forge> | null = null;
const builds = new Map<string, Promise<Forge>>();
/**
 * The package under measure; `build`, the absolute path of another build's dist/index.js (the
 * plain-path measure's baseline, lib/baseline.ts), imported beside it in the same process.
 * Another build's API is taken to be this one's where the bench uses it (connect, migrate,
 * enqueue, enqueueMany, runWorker).
 */
export function loadForge(build?: string): Promise<Forge> {
  if (build !== undefined) {
    let other = builds.get(build);
    if (!other) builds.set(build, (other = import(pathToFileURL(build).href) as Promise<Forge>));
    return other;
  }
  loaded ??= (
    fromSource
      ? import(new URL("../../packages/jobs/src/index.ts", import.meta.url).href)
      : fromPath
        ? import(pathToFileURL(entry).href)
        : import("@forge/jobs")
  ) as Promise<Forge>;
  return loaded;
}

export type ForgeDashboard = typeof import("../../packages/jobs/src/dashboard/index.ts");

/** @forge/jobs/dashboard, from the same place as loadForge (the built package, or the source with BENCH_FORGE_ENTRY=src). */
let dashboard: Promise<ForgeDashboard> | null = null;
export function loadDashboard(): Promise<ForgeDashboard> {
  dashboard ??= (
    fromSource ? import(new URL("../../packages/jobs/src/dashboard/index.ts", import.meta.url).href) : import("@forge/jobs/dashboard")
  ) as Promise<ForgeDashboard>;
  return dashboard;
}
