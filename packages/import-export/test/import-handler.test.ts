import { writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createImportHandler, importPayload, ImportError, type ImportProgress, type Importer, type JobContextLike } from "../src/index.js";
import { collectingImporter, FIXTURES, peopleCsv, type Person } from "./support/people.js";
import { rejection, withTempDir, expectTakenOver } from "./support/harness.js";

const payload = (file: string) => importPayload({ importer: "people", file });

describe("import handler: batches, progress and checkpoints", () => {
  it("writes in batches of batchSize, without a tx when there is no checkpoint", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "big.csv"), peopleCsv(1200));
      const { importer, batches, txs, written } = collectingImporter();
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, batchSize: 500 });
      const report = await handler(payload("big.csv"));
      expect(report).toEqual({ read: 1200, imported: 1200, rejected: 0, errors: [], format: { encoding: "utf8", delimiter: "," } });
      expect(batches.map((b) => b.length)).toEqual([500, 500, 200]);
      expect(txs).toEqual([undefined, undefined, undefined]);
      expect(written.map((p) => p.id)).toEqual(Array.from({ length: 1200 }, (_, i) => i + 1));
    });
  });

  it("heartbeats between batches without a checkpoint, and stops when the job is taken over", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "big.csv"), peopleCsv(1000));
      const { importer, batches } = collectingImporter();
      let beats = 0;
      const ctx: JobContextLike = { heartbeat: async () => ++beats < 2 };
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, batchSize: 100 });
      const error = await rejection(handler(payload("big.csv"), ctx));
      expectTakenOver(error);
      expect(beats).toBe(2);
      expect(batches).toHaveLength(2);
    });
  });

  it("commits each batch through ctx.checkpoint with its cursor and a progress estimate", async () => {
    await withTempDir(async (dir) => {
      const text = peopleCsv(1000, 7);
      await writeFile(path.join(dir, "big.csv"), text);
      const { importer, txs, written } = collectingImporter();
      const saved: ImportProgress[] = [];
      const ctx: JobContextLike = {
        progress: null,
        checkpoint: async (progress, work) => {
          await work?.({ fakeTx: saved.length });
          saved.push(progress as ImportProgress);
          return true;
        },
      };
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, batchSize: 250 });
      const report = await handler(payload("big.csv"), ctx);
      expect(report).toMatchObject({ read: 1000, imported: 858, rejected: 142 });
      expect(written).toHaveLength(858);
      expect(txs).toEqual([{ fakeTx: 0 }, { fakeTx: 1 }, { fakeTx: 2 }, { fakeTx: 3 }]);
      expect(saved.map((p) => p.line)).toEqual([251, 501, 751, 1001]);
      expect(saved.map((p) => p.read)).toEqual([250, 500, 750, 1000]);
      const size = Buffer.byteLength(text);
      for (const p of saved) {
        expect(p.totalBytes).toBe(size);
        expect(p.bytes).toBeGreaterThan(0);
        expect(p.bytes).toBeLessThanOrEqual(size);
        expect(p.estimatedTotal).toBeGreaterThanOrEqual(950);
        expect(p.estimatedTotal).toBeLessThanOrEqual(1050);
      }
      expect(saved.at(-1)).toMatchObject({ imported: 858, rejected: 142, bytes: size, estimatedTotal: 1000 });
    });
  });

  it("stops at once when the checkpoint says the job was taken over", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "big.csv"), peopleCsv(1000));
      const { importer, written } = collectingImporter();
      let calls = 0;
      const ctx: JobContextLike = {
        checkpoint: async (_progress, work) => {
          calls += 1;
          if (calls === 2) return false; // as the queue does: the work rolled back, never ran here
          await work?.(undefined);
          return true;
        },
      };
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, batchSize: 100 });
      const error = await rejection(handler(payload("big.csv"), ctx));
      expectTakenOver(error);
      expect(calls).toBe(2);
      expect(written).toHaveLength(100);
    });
  });

  it("resumes after the saved cursor with counts continued, so rows and errors are counted once", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "big.csv"), peopleCsv(1000, 10));
      const { importer, written } = collectingImporter();
      let saved: unknown = null;
      let calls = 0;
      const crashing: JobContextLike = {
        progress: null,
        checkpoint: async (progress, work) => {
          if (++calls === 4) throw new Error("connection lost");
          await work?.(undefined);
          saved = progress;
          return true;
        },
      };
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, batchSize: 150, maxErrors: 1000 });
      const crash = await rejection(handler(payload("big.csv"), crashing));
      expect(crash.retryable).toBe(true);
      expect(crash.message).toMatch(/connection lost/);
      expect(written).toHaveLength(3 * 135);

      const resumed: JobContextLike = {
        progress: { ...(saved as object), updatedAt: "2026-01-01T00:00:00Z" },
        checkpoint: async (progress, work) => {
          await work?.(undefined);
          saved = progress;
          return true;
        },
      };
      const report = await handler(payload("big.csv"), resumed);
      expect(report).toMatchObject({ read: 1000, imported: 900, rejected: 100 });
      expect(report.errors.map((e) => e.line)).toEqual(Array.from({ length: 100 }, (_, i) => (i + 1) * 10 + 1));
      expect(written.map((p) => p.id)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1).filter((i) => i % 10 !== 0));
    });
  });

  it("refuses to resume from progress that is not an import cursor, or over a file that changed", async () => {
    const { importer } = collectingImporter();
    const handler = createImportHandler({ importers: { people: importer }, baseDir: FIXTURES });
    const checkpoint = async () => true;
    const foreign = await rejection(handler(payload("people.csv"), { progress: { step: 3 }, checkpoint }));
    expect(foreign).toBeInstanceOf(ImportError);
    expect(foreign.retryable).toBe(false);
    const progress = { line: 2, read: 1, imported: 1, rejected: 0, errors: [], bytes: 50, totalBytes: 1, estimatedTotal: 2 };
    const changed = await rejection(handler(payload("people.csv"), { progress, checkpoint }));
    expect(changed.retryable).toBe(false);
    expect(changed.message).toMatch(/file changed/);
  });

  it("caps the error list at maxErrors and keeps the counts exact", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "bad.csv"), peopleCsv(300, 1));
      const { importer } = collectingImporter();
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, maxErrors: 10 });
      const report = await handler(payload("bad.csv"));
      expect(report.read).toBe(300);
      expect(report.rejected).toBe(300);
      expect(report.errors).toHaveLength(10);
      expect(report.truncatedErrors).toBe(290);
    });
  });

  it("keeps every record parsed before a malformed one, even within the same chunk", async () => {
    await withTempDir(async (dir) => {
      const rows = peopleCsv(5000).trimEnd().split("\n");
      rows.push('5001,"Bad"quote,x@example.com,n', "5002,Never,read@example.com,n");
      await writeFile(path.join(dir, "broken.csv"), `${rows.join("\n")}\n`);
      const { importer, written } = collectingImporter();
      const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, batchSize: 700 });
      const report = await handler(payload("broken.csv"));
      expect(written).toHaveLength(5000);
      expect(report).toMatchObject({ read: 5001, imported: 5000, rejected: 1 });
      expect(report.errors[0]).toMatchObject({ line: 5002, field: "" });
    });
  });

  it("accepts CRLF, LF and CR line endings mixed in one file, and counts lines across all of them", async () => {
    await withTempDir(async (dir) => {
      const text = 'id,name,email,note\r\n1,A,a@example.com,n\n2,B,b@example.com,n\r3,C,c@example.com,"x\r\ny"\n4,D,,n\n';
      await writeFile(path.join(dir, "mixed.csv"), text);
      const { importer, written } = collectingImporter();
      const report = await createImportHandler({ importers: { people: importer }, baseDir: dir })(payload("mixed.csv"));
      expect(written.map((p) => p.note)).toEqual(["n", "n", "x\r\ny"]);
      expect(report.errors).toEqual([{ line: 6, field: "email", message: "must be an email address" }]);
    });
  });

  it("passes validate the line the record starts on", async () => {
    const lines: number[] = [];
    const { importer } = collectingImporter();
    const spy: Importer<Person> = { ...importer, validate: (row, line) => (lines.push(line), importer.validate(row, line)) };
    const handler = createImportHandler({ importers: { people: spy }, baseDir: FIXTURES });
    await handler(payload("lines-crlf.csv"));
    expect(lines).toEqual([2, 6, 7, 8, 10]);
  });
});

describe("import handler: what throws, and whether a retry may fix it", () => {
  const { importer } = collectingImporter();
  const handler = createImportHandler({ importers: { people: importer, other: importer }, baseDir: FIXTURES });

  it("refuses a payload that is not an import payload, for good", async () => {
    for (const bad of [null, "people.csv", { importer: "people" }, { exporter: "people", file: "people.csv" }]) {
      const error = await rejection(handler(bad));
      expect(error).toBeInstanceOf(ImportError);
      expect(Object.prototype.hasOwnProperty.call(error, "retryable")).toBe(true);
      expect(error.retryable).toBe(false);
    }
  });

  it("refuses a path outside baseDir, for good", async () => {
    const error = await rejection(handler(payload("../package.json")));
    expect(error).toBeInstanceOf(ImportError);
    expect(error.retryable).toBe(false);
  });

  it("throws a retryable error naming the known importers for an unknown one", async () => {
    const error = await rejection(handler(importPayload({ importer: "nope", file: "people.csv" })));
    expect(error).toBeInstanceOf(ImportError);
    expect(error.retryable).toBe(true);
    expect(error.message).toContain('unknown importer "nope" (known: other, people)');
  });

  it("throws a retryable error for a missing file", async () => {
    const error = await rejection(handler(payload("missing.csv")));
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/missing\.csv.*ENOENT/);
  });

  it("throws a retryable error when writing a batch fails, and keeps the cause", async () => {
    const dbError = Object.assign(new Error("deadlock detected"), { code: "40P01" });
    const failing: Importer<Person> = { ...importer, writeBatch: async () => Promise.reject(dbError) };
    const h = createImportHandler({ importers: { people: failing }, baseDir: FIXTURES });
    const error = await rejection(h(payload("people.csv")));
    expect(error).toBeInstanceOf(ImportError);
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/deadlock detected/);
    expect(error.cause).toBe(dbError);
  });

  it("lets an importer's own non-retryable error through unchanged", async () => {
    const final = Object.assign(new Error("table is gone for good"), { retryable: false });
    const failing: Importer<Person> = { ...importer, writeBatch: async () => Promise.reject(final) };
    const h = createImportHandler({ importers: { people: failing }, baseDir: FIXTURES });
    expect(await rejection(h(payload("people.csv")))).toBe(final);
  });

  it("stops with a retryable error when the job's signal fires", async () => {
    const controller = new AbortController();
    controller.abort(new Error("shutting down"));
    const error = await rejection(handler(payload("people.csv"), { signal: controller.signal }));
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/aborted/);
  });

  it("checks its own options when created", () => {
    expect(() => createImportHandler({ importers: {}, baseDir: FIXTURES, batchSize: 0 })).toThrow(/batchSize/);
    expect(() => createImportHandler({ importers: {}, baseDir: FIXTURES, maxErrors: -1 })).toThrow(/maxErrors/);
  });
});
