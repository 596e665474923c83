import fs from "node:fs";
import path from "node:path";
import { fileEdges, sourceFiles, workspaceMembers } from "./cycles.js";

/**
 * The floors rule, for a package that declares its floors in a `house.json` beside its
 * package.json. Its `src` is a house of rooms (a folder of src, or a file at src's top); each
 * room stands on one floor. A file may import its own floor and the floors below, never one
 * above: the ground (types, errors, the drivers, the dialects) knows nothing of what is built on
 * it, so it can be read, tested and changed alone. A file named in `ownFolderOnly` is imported
 * from its own folder alone (a backend's dialect object: every other file asks the dialect
 * through its index, so what differs by backend stays a named capability of the dialect).
 */
export interface HouseRules {
  /** Rooms from the ground up; the rooms of one entry share a floor and may import each other. */
  floors: string[][];
  /** Files, relative to src, that only files of their own folder may import. */
  ownFolderOnly?: string[];
}

export interface FloorViolation {
  rule: "upward" | "own-folder" | "unplaced";
  /** Relative to the package's src. */
  file: string;
  line: number;
  message: string;
}

/** `house.json` files of the workspace: packages/*, apps/*, tools/* that declare floors. */
export function findHouses(repoRoot: string): string[] {
  return workspaceMembers(repoRoot)
    .map((member) => path.join(member, "house.json"))
    .filter((house) => fs.existsSync(house));
}

/** Reads and checks a house.json: a malformed one is an error, never an empty rule that passes. */
export function readRules(houseFile: string): HouseRules {
  const raw = JSON.parse(fs.readFileSync(houseFile, "utf8")) as Partial<HouseRules>;
  const isRooms = (v: unknown): v is string[] => Array.isArray(v) && v.length > 0 && v.every((r) => typeof r === "string" && r.length > 0);
  if (!Array.isArray(raw.floors) || raw.floors.length === 0 || !raw.floors.every(isRooms)) {
    throw new Error(`${houseFile}: "floors" must be a non-empty list of non-empty lists of room names`);
  }
  if (raw.ownFolderOnly !== undefined && !isRooms(raw.ownFolderOnly)) throw new Error(`${houseFile}: "ownFolderOnly" must be a list of file paths`);
  const seen = new Set<string>();
  for (const room of raw.floors.flat()) {
    if (seen.has(room)) throw new Error(`${houseFile}: room "${room}" stands on two floors`);
    seen.add(room);
  }
  return { floors: raw.floors, ownFolderOnly: raw.ownFolderOnly ?? [] };
}

/** The room of a file: its first folder under src, or the file itself at src's top. */
function roomOf(relative: string): string {
  const [first, ...rest] = relative.split("/");
  return rest.length > 0 ? (first as string) : relative;
}

/** Every import of the package's src that breaks its house rules. */
export function checkFloors(houseFile: string): FloorViolation[] {
  const rules = readRules(houseFile);
  const src = path.join(path.dirname(houseFile), "src");
  const floorOf = new Map<string, number>();
  rules.floors.forEach((rooms, i) => rooms.forEach((room) => floorOf.set(room, i)));
  const describe = (i: number) => rules.floors[i]!.join(", ");
  const below = (i: number) =>
    rules.floors
      .slice(0, i + 1)
      .flat()
      .join(", ");
  const ownFolderOnly = new Set(rules.ownFolderOnly);
  const files = sourceFiles(src);
  const known = new Set(files);
  const rel = (file: string) => path.relative(src, file).split(path.sep).join("/");
  const violations: FloorViolation[] = [];
  for (const file of files) {
    const from = rel(file);
    const floor = floorOf.get(roomOf(from));
    if (floor === undefined) {
      violations.push({ rule: "unplaced", file: from, line: 1, message: `${from}: room "${roomOf(from)}" stands on no floor of house.json (place it)` });
      continue;
    }
    for (const edge of fileEdges(file, known)) {
      const to = rel(edge.to);
      const target = floorOf.get(roomOf(to));
      if (target !== undefined && target > floor) {
        violations.push({
          rule: "upward",
          file: from,
          line: edge.line,
          message: `${from}:${edge.line} imports ${to}, a floor above (${describe(target)}); ${describe(floor)} may import only ${below(floor)}`,
        });
      }
      if (ownFolderOnly.has(to) && path.posix.dirname(to) !== path.posix.dirname(from)) {
        violations.push({
          rule: "own-folder",
          file: from,
          line: edge.line,
          message: `${from}:${edge.line} imports ${to}, which only its own folder may import (ask for it through ${path.posix.dirname(to)}/index.ts)`,
        });
      }
    }
  }
  return violations;
}
