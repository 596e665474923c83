import type * as Jobs from "../../packages/jobs/src/index.ts";

export type Forge = typeof Jobs;

/**
 * @forge/jobs as users run it: the built package (`pnpm bench` builds it first, so it is what the
 * work tree holds). BENCH_FORGE_ENTRY=src imports its TypeScript source through tsx instead (no
 * build step), which costs CPU a user does not pay: tsx's transform keeps function names by
 * wrapping every closure as it is created.
 */
const fromSource = process.env.BENCH_FORGE_ENTRY === "src";
let loaded: Promise<Forge> | null = null;
export function loadForge(): Promise<Forge> {
  loaded ??= (fromSource ? import(new URL("../../packages/jobs/src/index.ts", import.meta.url).href) : import("@forge/jobs")) as Promise<Forge>;
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
