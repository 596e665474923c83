import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createImportHandler, importPayload, type JobContextLike } from "../src/index.js";
import { collectingImporter, peopleCsv } from "./support/people.js";
import { withTempDir } from "./support/harness.js";

// ctx.reportProgress (the queue's live progress, issue 36.7): an import reports its counts and
// estimate after each batch, for a progress bar; without it (called by hand) nothing changes.
describe("import handler: live progress", () => {
  it("reports read, imported, rejected and the estimate after every batch, the last one complete", async () => {
    await withTempDir(async (dir) => {
      const text = peopleCsv(1000, 7);
      await writeFile(path.join(dir, "big.csv"), text);
      const { importer } = collectingImporter();
      const reported: Record<string, unknown>[] = [];
      const ctx: JobContextLike = {
        reportProgress: async (value) => {
          reported.push(value as Record<string, unknown>);
          return true;
        },
      };
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, batchSize: 250 });
      const report = await handler(importPayload({ importer: "people", file: "big.csv" }), ctx);
      expect(reported.map((r) => r.read)).toEqual([250, 500, 750, 1000]);
      expect(reported.at(-1)).toEqual({
        read: 1000,
        imported: 858,
        rejected: 142,
        estimatedTotal: 1000,
        bytes: Buffer.byteLength(text),
        totalBytes: Buffer.byteLength(text),
      });
      expect(report).toMatchObject({ read: 1000, imported: 858, rejected: 142 });
    });
  });

  it("a report that fails fails nothing", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "small.csv"), peopleCsv(10));
      const { importer } = collectingImporter();
      const ctx: JobContextLike = { reportProgress: () => Promise.reject(new Error("queue down")) };
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir });
      await expect(handler(importPayload({ importer: "people", file: "small.csv" }), ctx)).resolves.toMatchObject({ read: 10, imported: 10 });
    });
  });
});
