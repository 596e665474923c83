import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const here = dirname(fileURLToPath(import.meta.url));
const examples = join(here, "..", "examples");
const readme = readFileSync(join(here, "..", "..", "..", "packages", "jobs", "README.md"), "utf8");

// The README's ORM sections show these files, which the other tests in this folder run: a
// README edited without the file (or the reverse) fails here.
describe("the @forge/jobs README's ORM examples", () => {
  for (const file of readdirSync(examples).filter((f) => f.endsWith(".ts"))) {
    it(`shows examples/${file} as it is`, () => {
      const code = readFileSync(join(examples, file), "utf8").trimEnd();
      expect(readme).toContain("```ts\n" + code + "\n```");
    });
  }

  it("has the matrix row of every ORM", () => {
    for (const orm of ["Prisma 7", "Drizzle", "Kysely", "Knex", "TypeORM"]) expect(readme).toMatch(new RegExp(`^\\| ${orm}.*\\|$`, "m"));
  });
});
