import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  createExportHandler,
  escapeFormula,
  exportPayload,
  ExportError,
  type ExportOptions,
  type Exporter,
  type ExportRowsContext,
  type JsonValue,
} from "../src/index.js";
import { rejection, withTempDir } from "./support/harness.js";

const listOf = (rows: Record<string, unknown>[]): Exporter => ({
  async *rows() {
    yield* rows;
  },
});

async function exportRows(rows: Record<string, unknown>[], options: Partial<ExportOptions> = {}, columns?: Exporter["columns"]) {
  return withTempDir(async (dir) => {
    const handler = createExportHandler({ exporters: { list: { ...listOf(rows), ...(columns ? { columns } : {}) } }, baseDir: dir });
    const result = await handler(exportPayload({ exporter: "list", file: "out.csv", options }));
    const text = await readFile(path.join(dir, "out.csv"), "utf8");
    return { result, text, size: (await stat(path.join(dir, "out.csv"))).size };
  });
}

/** A promise with its resolve function outside, to hold an exporter at a known point. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe("export handler", () => {
  it("writes the rows with a header and reports rows and bytes", async () => {
    const { result, text, size } = await exportRows([
      { id: 1, name: "Alice", note: 'says "hi", twice' },
      { id: 2, name: "Zoë", note: "two\nlines" },
    ]);
    expect(text).toBe('id,name,note\n1,Alice,"says ""hi"", twice"\n2,Zoë,"two\nlines"\n');
    expect(result).toEqual({ file: "out.csv", rows: 2, bytes: size });
  });

  it("follows the exporter's columns and labels, and the delimiter, BOM and CRLF options", async () => {
    const { text } = await exportRows([{ b: "x;y", a: 1, ignored: true }], { delimiter: ";", bom: true, recordDelimiter: "\r\n" }, [
      { key: "a", header: "First" },
      "b",
    ]);
    expect(text).toBe('\ufeffFirst;b\r\n1;"x;y"\r\n');
  });

  it("neutralises spreadsheet formulas by default, numbers included", async () => {
    const { text } = await exportRows([{ a: "=1+1", b: -5, c: "@SUM(A1)", d: "+x", e: "\tx", f: "\rx", g: "plain -1", h: 5 }], {}, [
      "a",
      "b",
      "c",
      "d",
      "e",
      "f",
      "g",
      "h",
    ]);
    expect(text.split("\n")[1]).toBe(`'=1+1,'-5,'@SUM(A1),'+x,'\tx,"'\rx",plain -1,5`);
    expect(escapeFormula("-5")).toBe("'-5");
    expect(escapeFormula("5-")).toBe("5-");
  });

  it("writes cells verbatim when escapeFormulas is off", async () => {
    const { text } = await exportRows([{ a: "=1+1", b: -5 }], { escapeFormulas: false });
    expect(text).toBe("a,b\n=1+1,-5\n");
  });

  it("hands the exporter its params and a signal", async () => {
    await withTempDir(async (dir) => {
      const seen: { params: JsonValue | undefined; ctx: ExportRowsContext }[] = [];
      const exporter: Exporter<{ since: string }> = {
        async *rows(params, ctx) {
          seen.push({ params, ctx });
          yield { since: params.since };
        },
      };
      const handler = createExportHandler({ exporters: { e: exporter }, baseDir: dir });
      await handler(exportPayload({ exporter: "e", file: "e.csv", params: { since: "2026-01-01" } }));
      expect(seen[0]!.params).toEqual({ since: "2026-01-01" });
      expect(seen[0]!.ctx.signal).toBeInstanceOf(AbortSignal);
    });
  });

  it("never shows a reader half a file: the old file stays until the new one is complete", async () => {
    await withTempDir(async (dir) => {
      const target = path.join(dir, "report.csv");
      await writeFile(target, "old\n");
      const halfway = gate();
      const resume = gate();
      const exporter: Exporter = {
        async *rows() {
          for (let i = 0; i < 5000; i++) yield { i, text: "x".repeat(50) };
          halfway.open();
          await resume.opened;
          yield { i: 5000, text: "last" };
        },
      };
      const handler = createExportHandler({ exporters: { big: exporter }, baseDir: dir });
      const running = handler(exportPayload({ exporter: "big", file: "report.csv" }));
      await halfway.opened;
      expect(await readFile(target, "utf8")).toBe("old\n");
      expect((await readdir(dir)).filter((n) => n.endsWith(".tmp"))).toHaveLength(1);
      resume.open();
      const result = await running;
      expect(result.rows).toBe(5001);
      const text = await readFile(target, "utf8");
      expect(text.startsWith("i,text\n0,")).toBe(true);
      expect(text.endsWith("5000,last\n")).toBe(true);
      expect(await readdir(dir)).toEqual(["report.csv"]);
    });
  });

  it("removes the temporary file and keeps the old one when the rows fail, as retryable", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "report.csv"), "old\n");
      const cause = new Error("query timed out");
      const exporter: Exporter = {
        async *rows() {
          yield { a: 1 };
          throw cause;
        },
      };
      const handler = createExportHandler({ exporters: { bad: exporter }, baseDir: dir });
      const error = await rejection(handler(exportPayload({ exporter: "bad", file: "report.csv" })));
      expect(error).toBeInstanceOf(ExportError);
      expect(error.retryable).toBe(true);
      expect(error.cause).toBe(cause);
      expect(await readdir(dir)).toEqual(["report.csv"]);
      expect(await readFile(path.join(dir, "report.csv"), "utf8")).toBe("old\n");
    });
  });

  it("stops and cleans up when the job's signal fires", async () => {
    await withTempDir(async (dir) => {
      const controller = new AbortController();
      const exporter: Exporter = {
        async *rows() {
          yield { a: 1 };
          controller.abort(new Error("lease lost"));
          yield { a: 2 };
        },
      };
      const handler = createExportHandler({ exporters: { e: exporter }, baseDir: dir });
      const error = await rejection(handler(exportPayload({ exporter: "e", file: "e.csv" }), { signal: controller.signal }));
      expect(error.retryable).toBe(true);
      expect(await readdir(dir)).toEqual([]);
    });
  });

  it("sorts failures into retryable or not", async () => {
    await withTempDir(async (dir) => {
      const handler = createExportHandler({ exporters: { list: listOf([]) }, baseDir: dir });
      const unknown = await rejection(handler(exportPayload({ exporter: "nope", file: "a.csv" })));
      expect(unknown.retryable).toBe(true);
      expect(unknown.message).toContain('unknown exporter "nope" (known: list)');
      const outside = await rejection(handler(exportPayload({ exporter: "list", file: "../a.csv" })));
      expect(outside).toBeInstanceOf(ExportError);
      expect(outside.retryable).toBe(false);
      const notPayload = await rejection(handler({ importer: "list", file: "a.csv" }));
      expect(notPayload.retryable).toBe(false);
      const final = Object.assign(new Error("no such report"), { retryable: false });
      const failing = createExportHandler({
        exporters: {
          f: {
            rows: () => {
              throw final;
            },
          },
        },
        baseDir: dir,
      });
      expect(await rejection(failing(exportPayload({ exporter: "f", file: "a.csv" })))).toBe(final);
      expect(await readdir(dir)).toEqual([]);
    });
  });
});
