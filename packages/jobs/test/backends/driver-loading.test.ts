import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadDriver } from "../../src/db/driver.js";

describe("optional drivers", () => {
  it("a missing driver fails with an error naming the package and the command to install it", () => {
    // Same loader as better-sqlite3 and mysql2 go through, asked for a package that is not installed.
    expect(() => loadDriver("forge-jobs-no-such-driver", "forge-jobs-no-such-driver@12", "The SQLite backend")).toThrow(
      'The SQLite backend needs the optional package "forge-jobs-no-such-driver", which is not installed: npm install forge-jobs-no-such-driver@12',
    );
  });

  it("a subpath of a missing package names the package to install", () => {
    expect(() => loadDriver("forge-jobs-no-such-driver/promise", "forge-jobs-no-such-driver@3", "The MariaDB backend")).toThrow(
      /needs the optional package "forge-jobs-no-such-driver".*npm install forge-jobs-no-such-driver@3$/,
    );
  });

  it("a driver that is installed but broken reports its own error, not 'install it'", () => {
    const broken = fileURLToPath(new URL("./fixtures/broken-driver.cjs", import.meta.url));
    expect(() => loadDriver(broken, "broken@1", "The SQLite backend")).toThrow(/forge-jobs-test-dependency-that-does-not-exist/);
    expect(() => loadDriver(broken, "broken@1", "The SQLite backend")).not.toThrow(/npm install/);
  });

  it("the installed drivers load", () => {
    expect(loadDriver<unknown>("better-sqlite3", "better-sqlite3@12", "The SQLite backend")).toBeTypeOf("function");
    expect(loadDriver<{ createPool: unknown }>("mysql2/promise", "mysql2@3", "The MariaDB backend").createPool).toBeTypeOf("function");
  });
});
