// @ts-check
// ESLint over the TypeScript sources and tests, with type information (each file is read through
// the tsconfig.json of its package). The rules kept are the ones that catch bugs a queue cannot
// afford: a promise nobody awaits is a write that may never happen or an error nobody sees.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    // Build output, and the isolation tool's fixtures: small trees that break the rules on purpose.
    ignores: [
      "**/dist/**",
      "**/node_modules/**",
      "**/.turbo/**",
      "bench/results/**",
      "tools/isolation/test/fixtures/**",
      "tools/orm-tests/generated/**",
      "**/*.js",
      "**/*.cjs",
      "**/*.mjs",
    ],
  },
  {
    files: [
      "packages/*/src/**/*.ts",
      "packages/*/test/**/*.ts",
      "apps/*/src/**/*.ts",
      "apps/*/test/**/*.ts",
      "tools/*/src/**/*.ts",
      "tools/*/test/**/*.ts",
      "bench/src/**/*.ts",
      "bench/import-export/**/*.ts",
    ],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // The point of the linter. `void promise` stays allowed for a deliberate fire-and-forget,
      // which must then handle its own rejection (say why on the line).
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      // A switch over a union with no `default` must name every member; a `default` is a
      // deliberate catch-all (e.g. the csv-parse codes we do not reword).
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { considerDefaultExhaustiveForUnions: true }],
      // `reject(signal.reason)` passes the AbortSignal's own reason on, typed `any` by the DOM lib.
      "@typescript-eslint/prefer-promise-reject-errors": ["error", { allowThrowingAny: true }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", ignoreRestSiblings: true }],

      // Off: `any` arrives from driver rows (pg, mysql2, better-sqlite3) and parsed JSON, and is
      // narrowed by hand there; tsc --strict and no-explicit-any keep new `any` out of our own
      // types. These would force casts across tests and the bench without finding a bug.
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      // Off: an `async` function without `await` is deliberate (a throw becomes a rejection, the
      // signature matches an interface), and an extra assertion is style, not a bug.
      "@typescript-eslint/require-await": "off",
      "@typescript-eslint/no-unnecessary-type-assertion": "off",
      // Off: every String(x) it flagged is a value typed `unknown` (a thrown value, a user's field)
      // where "[object Object]" is the intended last resort; template literals keep
      // restrict-template-expressions.
      "@typescript-eslint/no-base-to-string": "off",
    },
  },
  {
    // The bench reads its own results JSON loosely; nothing in it is a published type.
    files: ["bench/src/**/*.ts", "bench/import-export/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
