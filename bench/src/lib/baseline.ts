import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";

/**
 * The build the plain path is compared with (issue 36: "the plain path unchanged, same run,
 * ≥ 0.97×, every option unused"): the last commit before the first of issue 36's features
 * (debounce), with the queue's storage, flow control and steps as they were. BENCH_BASELINE
 * names another commit.
 */
export const BASELINE_COMMIT = process.env.BENCH_BASELINE ?? "0f9f3b0";

const REPO = fileURLToPath(new URL("../../..", import.meta.url));

/**
 * The baseline's dist/index.js, built once per commit outside the tree: the commit's files
 * from `git archive`, its own lockfile installed from the local store (no network), and its
 * `@forge/jobs` built. A build that stopped half-way lacks the marker and is made again.
 */
export function baselineBuild(commit = BASELINE_COMMIT): string {
  const sha = execFileSync("git", ["rev-parse", "--short=12", `${commit}^{commit}`], { cwd: REPO, encoding: "utf8" }).trim();
  const dir = `${tmpdir()}/forge-bench-baseline/${sha}`;
  const entry = `${dir}/packages/jobs/dist/index.js`;
  const marker = `${dir}/.built`;
  if (existsSync(marker) && existsSync(entry)) return entry;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const quiet = { cwd: dir, stdio: ["ignore", "ignore", "inherit"] as ("ignore" | "inherit")[] };
  execFileSync("sh", ["-c", `git -C "${REPO}" archive ${sha} | tar -x -C "${dir}"`], { stdio: "inherit" });
  execFileSync("pnpm", ["install", "--frozen-lockfile", "--offline"], quiet);
  execFileSync("pnpm", ["--filter", "@forge/jobs", "build"], quiet);
  writeFileSync(marker, `${commit}\n`);
  return entry;
}
