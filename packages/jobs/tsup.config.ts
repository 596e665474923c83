import { defineConfig } from "tsup";

export default defineConfig([
  {
    entry: { index: "src/index.ts", dashboard: "src/dashboard/index.ts" },
    format: ["esm", "cjs"],
    dts: true,
    sourcemap: true,
    // Everything else in dist/ goes; the CLI, built by the entry below at the same time, stays.
    clean: ["cli.cjs", "cli.cjs.map"],
    target: "node20",
    // import.meta.url in the CJS build (optional drivers are loaded with createRequire).
    shims: true,
  },
  {
    // The CLI runs through bin/forge-jobs.cjs, which requires it: CommonJS only.
    entry: { cli: "src/cli.ts" },
    format: ["cjs"],
    sourcemap: true,
    clean: false,
    target: "node20",
    shims: true,
  },
]);
