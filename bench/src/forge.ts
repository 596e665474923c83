import type * as Jobs from "../../packages/jobs/src/index.ts";

export type Forge = typeof Jobs;

/**
 * @forge/jobs as it is in the work tree: its TypeScript source through tsx (no build step, and
 * always what the other packages' authors have just written). BENCH_FORGE_ENTRY=dist uses the
 * built package instead (`pnpm --filter @forge/jobs build` first).
 */
let loaded: Promise<Forge> | null = null;
export function loadForge(): Promise<Forge> {
  loaded ??= (
    process.env.BENCH_FORGE_ENTRY === "dist" ? import("@forge/jobs") : import(new URL("../../packages/jobs/src/index.ts", import.meta.url).href)
  ) as Promise<Forge>;
  return loaded;
}

export type ForgeDashboard = typeof import("../../packages/jobs/src/dashboard/index.ts");

/** @forge/jobs/dashboard, from the same place as loadForge (source, or the built package with BENCH_FORGE_ENTRY=dist). */
let dashboard: Promise<ForgeDashboard> | null = null;
export function loadDashboard(): Promise<ForgeDashboard> {
  dashboard ??= (
    process.env.BENCH_FORGE_ENTRY === "dist"
      ? import("@forge/jobs/dashboard")
      : import(new URL("../../packages/jobs/src/dashboard/index.ts", import.meta.url).href)
  ) as Promise<ForgeDashboard>;
  return dashboard;
}
