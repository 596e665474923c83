import { defineConfig } from "tsup";

export default defineConfig({
  entry: { index: "src/index.ts", cli: "src/cli.ts", dashboard: "src/dashboard/index.ts" },
  format: ["esm", "cjs"],
  dts: { entry: { index: "src/index.ts", dashboard: "src/dashboard/index.ts" } },
  sourcemap: true,
  clean: true,
  target: "node20",
  // import.meta.url in the CJS build (optional drivers are loaded with createRequire).
  shims: true,
});
