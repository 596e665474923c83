// `pnpm --filter @forge/packaging pack-sizes` (after `pnpm build`): what each package weighs as
// published, from `npm pack --dry-run`. The figures in README.md come from here.
import { existsSync } from "node:fs";
import path from "node:path";
import { kB, packageDirs, packSize } from "./packages.js";

const rows = [["package", "tarball", "unpacked", "files"]];
for (const dir of packageDirs()) {
  if (!existsSync(path.join(dir, "dist"))) throw new Error(`${dir}/dist is missing: run pnpm build first`);
  const size = await packSize(dir);
  rows.push([size.name, kB(size.size), kB(size.unpackedSize), String(size.files)]);
}
const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
for (const row of rows) console.log(row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  "));
