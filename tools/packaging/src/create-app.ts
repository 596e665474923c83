// `pnpm create-app <folder>` (from the repository's root, which builds the packages first):
// apps/sample copied out as an app of its own, installed from the packages' tarballs. The
// packages are not on the npm registry yet; see the root README, "Start your own app".
import path from "node:path";
import { createApp, CreateAppError, VENDOR_DIR } from "./template.js";

const USAGE = "usage: pnpm create-app <folder>   (a new or empty folder, e.g. ../my-app)";

/** pnpm runs a script in its package's folder; the user's relative path is from where they typed it. */
const cwd = process.env.INIT_CWD || process.cwd();

const args = process.argv.slice(2).filter((a) => a !== "--");
if (args.length !== 1 || args[0]!.startsWith("-")) {
  console.error(args.length === 0 ? `create-app: name the folder to create.\n${USAGE}` : `create-app: expected one folder, got ${args.join(" ")}\n${USAGE}`);
  process.exit(2);
}
const target = path.resolve(cwd, args[0]!);

try {
  const { name, tarballs } = await createApp(target);
  const shown = path.relative(cwd, target) || ".";
  console.log(`Created ${name} in ${target}`);
  for (const [pkg, file] of Object.entries(tarballs)) console.log(`  ${pkg}  file:${VENDOR_DIR}/${file}`);
  console.log(`\nNext:\n  cd ${shown}\n  pnpm install\n  pnpm demo`);
} catch (error) {
  if (!(error instanceof CreateAppError)) throw error;
  console.error(`create-app: ${error.message}`);
  process.exit(1);
}
