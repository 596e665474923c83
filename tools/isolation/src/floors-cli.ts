import path from "node:path";
import { pathToFileURL } from "node:url";
import { DEFAULT_REPO_ROOT } from "./cycles-cli.js";
import { checkFloors, findHouses } from "./floors.js";

/**
 * `tsx src/floors-cli.ts [repoRoot]`: checks every package that declares its floors (house.json)
 * and prints one line per import that breaks them; 1 when there is any, 0 with a summary
 * otherwise, 2 when a house.json cannot be read.
 */
export function runFloorsCli(
  args: readonly string[],
  out: (text: string) => void = (text) => process.stdout.write(text),
  err: (text: string) => void = (text) => process.stderr.write(text),
): number {
  const root = path.resolve(args[0] ?? DEFAULT_REPO_ROOT);
  const houses = findHouses(root);
  let broken = 0;
  for (const house of houses) {
    let violations;
    try {
      violations = checkFloors(house);
    } catch (error) {
      err(`floors: cannot check ${path.relative(root, house)}: ${error instanceof Error ? error.message : String(error)}\n`);
      return 2;
    }
    for (const v of violations) out(`floors: ${path.relative(root, path.dirname(house))}/src/${v.message}\n`);
    broken += violations.length;
  }
  if (broken > 0) {
    err(`floors: ${broken} import(s) against the floors of house.json (a lower floor imports nothing above it)\n`);
    return 1;
  }
  out(`floors: ${houses.length} house(s) (${houses.map((h) => path.relative(root, path.dirname(h))).join(", ")}), every import on its floor or below\n`);
  return 0;
}

const entry = process.argv[1];
if (entry && import.meta.url === pathToFileURL(path.resolve(entry)).href) {
  process.exitCode = runFloorsCli(process.argv.slice(2));
}
