import { readFile, readdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  EXPORT_JOB_TASK,
  exportPayload,
  ExportError,
  IMPORT_JOB_TASK,
  importPayload,
  ImportError,
  type ExportPayload,
  type ImportPayload,
  type TaskName,
} from "../src/index.js";

describe("task names", () => {
  it("carry their payload type as a phantom", () => {
    expect(IMPORT_JOB_TASK).toBe("forge.import.csv");
    expect(EXPORT_JOB_TASK).toBe("forge.export.csv");
    expectTypeOf(IMPORT_JOB_TASK).toEqualTypeOf<TaskName<ImportPayload>>();
    expectTypeOf(EXPORT_JOB_TASK).toEqualTypeOf<TaskName<ExportPayload>>();
  });
});

describe("importPayload", () => {
  it("fills every default in, so the payload is explicit JSON", () => {
    const payload = importPayload({ importer: "people", file: "uploads/a.csv" });
    expect(payload).toEqual({
      importer: "people",
      file: "uploads/a.csv",
      format: "csv",
      options: {
        delimiter: "auto",
        header: true,
        quote: '"',
        escape: '"',
        encoding: "auto",
        skipEmptyLines: true,
        relaxColumnCount: false,
      },
      dryRun: false,
    });
    expect(JSON.parse(JSON.stringify(payload))).toEqual(payload);
    expect(importPayload(payload)).toEqual(payload);
  });

  it("takes xlsx from the file name, and keeps dryRun, rejectsFile and sheet", () => {
    const payload = importPayload({ importer: "x", file: "in/Book.XLSX", dryRun: true, rejectsFile: "in/rejects.csv", options: { sheet: "Contacts" } });
    expect(payload).toMatchObject({ format: "xlsx", dryRun: true, rejectsFile: "in/rejects.csv", options: { sheet: "Contacts" } });
    expect(importPayload({ importer: "x", file: "a.xlsx", format: "csv" }).format).toBe("csv");
  });

  it("keeps the options given, normalising utf-8 and copying columns", () => {
    const columns = ["a", "b"];
    const payload = importPayload({
      importer: "x",
      file: "f.csv",
      options: { delimiter: ";", header: false, columns, quote: "'", escape: "\\", encoding: "utf-8", skipEmptyLines: false, relaxColumnCount: true },
    });
    expect(payload.options).toEqual({
      delimiter: ";",
      header: false,
      columns: ["a", "b"],
      quote: "'",
      escape: "\\",
      encoding: "utf8",
      skipEmptyLines: false,
      relaxColumnCount: true,
    });
    expect(payload.options.columns).not.toBe(columns);
  });

  it.each([
    [{ importer: "", file: "a.csv" }, /importer must be a non-empty string/],
    [{ importer: "x", file: 3 }, /file must be a non-empty string/],
    [{ importer: "x", file: "a\0.csv" }, /NUL/],
    [{ importer: "x", file: "a.csv", extra: 1 }, /unknown key "extra"/],
    [{ importer: "x", file: "a.csv", format: "ods" }, /format must be one of "csv", "xlsx"/],
    [{ importer: "x", file: "a.csv", dryRun: "yes" }, /dryRun must be a boolean/],
    [{ importer: "x", file: "a.csv", rejectsFile: "a.csv" }, /rejectsFile must differ from file/],
    [{ importer: "x", file: "a.csv", options: { encoding: "ebcdic" } }, /options.encoding must be one of "auto", "utf8", "utf16le"/],
    [{ importer: "x", file: "a.csv", options: { delimeter: ";" } }, /unknown key "delimeter"/],
    [{ importer: "x", file: "a.csv", options: { delimiter: ";;" } }, /options.delimiter must be a single character/],
    [{ importer: "x", file: "a.csv", options: { delimiter: '"' } }, /must differ from options.quote/],
    [{ importer: "x", file: "a.csv", options: { encoding: "utf16" } }, /options.encoding must be one of/],
    [{ importer: "x", file: "a.csv", options: { header: false } }, /options.columns is required/],
    [{ importer: "x", file: "a.csv", options: { columns: ["a", "a"] } }, /must not repeat/],
    [{ importer: "x", file: "a.csv", options: { skipEmptyLines: "yes" } }, /must be a boolean/],
  ])("refuses %j as not retryable", (input, message) => {
    let thrown: unknown;
    try {
      importPayload(input as never);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ImportError);
    expect((thrown as ImportError).message).toMatch(message);
    expect((thrown as ImportError).retryable).toBe(false);
  });
});

describe("exportPayload", () => {
  it("fills defaults in and keeps JSON params", () => {
    const payload = exportPayload({ exporter: "orders", file: "out/orders.csv", params: { since: "2026-01-01", ids: [1, 2] } });
    expect(payload).toEqual({
      exporter: "orders",
      file: "out/orders.csv",
      format: "csv",
      params: { since: "2026-01-01", ids: [1, 2] },
      options: { delimiter: ",", header: true, bom: false, escapeFormulas: true, recordDelimiter: "\n" },
    });
    expect(exportPayload({ exporter: "o", file: "o.csv" })).not.toHaveProperty("params");
  });

  it.each([{ at: new Date() }, { n: Number.NaN }, [undefined], new Map()])("refuses params that are not JSON: %s", (params) => {
    expect(() => exportPayload({ exporter: "o", file: "o.csv", params: params as never })).toThrow(ExportError);
  });

  it("refuses unknown options", () => {
    expect(() => exportPayload({ exporter: "o", file: "o.csv", options: { eol: "\n" } as never })).toThrow(/unknown key "eol"/);
  });
});

describe("isolation", () => {
  it("imports no @forge package, not even for types, and lists none in package.json", async () => {
    // Spelled in two parts so this file does not match its own search.
    const scope = ["@forge", "/"].join("");
    const root = fileURLToPath(new URL("../", import.meta.url));
    const manifest = JSON.parse(await readFile(`${root}package.json`, "utf8")) as Record<string, Record<string, string> | undefined>;
    for (const field of ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"]) {
      expect(Object.keys(manifest[field] ?? {}).filter((name) => name.startsWith(scope))).toEqual([]);
    }
    for (const dir of ["src", "test", "test/support"]) {
      for (const name of (await readdir(`${root}${dir}`)).filter((n) => n.endsWith(".ts"))) {
        const source = await readFile(`${root}${dir}/${name}`, "utf8");
        expect(source.includes(`"${scope}`) || source.includes(`'${scope}`), `${dir}/${name}`).toBe(false);
      }
    }
  });
});
