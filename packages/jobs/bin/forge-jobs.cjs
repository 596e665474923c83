#!/usr/bin/env node
// The `forge-jobs` command. A committed file rather than dist/cli.cjs itself: package managers
// link a bin at install time, and in a clone dist/ appears only with the build after it, so a
// bin pointing into dist/ was missing until a second install.
"use strict";
const path = require("node:path");
const fs = require("node:fs");

const cli = path.join(__dirname, "..", "dist", "cli.cjs");
if (!fs.existsSync(cli)) {
  process.stderr.write(`forge-jobs: ${cli} is missing: build @forge/jobs first (pnpm build)\n`);
  process.exit(1);
}
require("../dist/cli.cjs");
