import { describe, expect, it } from "vitest";
import { createImportHandler, importPayload, type ImportOptionsInput } from "../src/index.js";
import { collectingImporter, FIXTURES } from "./support/people.js";

async function importFixture(file: string, options: ImportOptionsInput = {}) {
  const { importer, written } = collectingImporter();
  const handler = createImportHandler({ importers: { people: importer }, baseDir: FIXTURES });
  // How the file was read is checked where it matters (sniff.test.ts), not in every report here.
  const { format, ...report } = await handler(importPayload({ importer: "people", file, options }));
  return { report, format, written };
}

describe("importing the fixture files", () => {
  it("reads quoted fields with embedded delimiters, doubled quotes, newlines and non-ASCII text", async () => {
    const { report, written } = await importFixture("people.csv");
    expect(report).toEqual({ read: 5, imported: 5, rejected: 0, errors: [] });
    expect(written).toEqual([
      { id: 1, name: "Alice", email: "alice@example.com", note: "plain" },
      { id: 2, name: "Smith, Bob", email: "bob@example.com", note: 'says "hi"' },
      { id: 3, name: "Zoë Ångström", email: "zoe@example.com", note: "line one\nline two" },
      { id: 4, name: "Renée", email: "renee@example.com", note: "" },
      { id: 5, name: "Müller 日本", email: "mueller@example.com", note: "a,b;c" },
    ]);
  });

  it.each(["lines-lf.csv", "lines-crlf.csv"])("reports the line each rejected record starts on (%s)", async (file) => {
    const { report, written } = await importFixture(file);
    expect(report).toEqual({
      read: 5,
      imported: 3,
      rejected: 2,
      errors: [
        { line: 6, field: "id", message: "must be a whole number" },
        { line: 8, field: "name", message: "is required" },
      ],
    });
    expect(written.map((p) => p.id)).toEqual([1, 3, 5]);
    const eol = file === "lines-crlf.csv" ? "\r\n" : "\n";
    expect(written[0]!.note).toBe(`first${eol}second${eol}third`);
  });

  it("skips a UTF-8 byte order mark, so the first column keeps its name", async () => {
    const { report, written } = await importFixture("bom.csv");
    expect(report.imported).toBe(2);
    expect(written[0]).toEqual({ id: 1, name: "Alice", email: "alice@example.com", note: "with bom" });
  });

  it("skips empty lines by default and counts them in line numbers", async () => {
    const { report, written } = await importFixture("empty-lines.csv");
    expect(report).toEqual({ read: 2, imported: 2, rejected: 0, errors: [] });
    expect(written.map((p) => p.id)).toEqual([1, 2]);
  });

  it("reports empty lines as ragged rows when skipEmptyLines is false", async () => {
    const { report } = await importFixture("empty-lines.csv", { skipEmptyLines: false });
    expect(report.imported).toBe(2);
    expect(report.errors.map((e) => e.line)).toEqual([2, 4, 5, 7]);
    expect(report.errors[0]).toEqual({ line: 2, field: "", message: "expected 4 fields, got 1" });
  });

  it("reads a semicolon-delimited file", async () => {
    const { written } = await importFixture("semicolon.csv", { delimiter: ";" });
    expect(written).toEqual([
      { id: 1, name: "Doe; John", email: "john@example.com", note: "1,5" },
      { id: 2, name: "Zoë", email: "zoe@example.com", note: 'quoted "; here"' },
    ]);
  });

  it("reports ragged rows as rejected rows instead of throwing", async () => {
    const { report, written } = await importFixture("ragged.csv");
    expect(report).toEqual({
      read: 4,
      imported: 2,
      rejected: 2,
      errors: [
        { line: 3, field: "", message: "expected 4 fields, got 3" },
        { line: 4, field: "", message: "expected 4 fields, got 5" },
      ],
    });
    expect(written.map((p) => p.id)).toEqual([1, 4]);
  });

  it("pads short rows and drops extra fields when relaxColumnCount is on", async () => {
    const { report, written } = await importFixture("ragged.csv", { relaxColumnCount: true });
    expect(report.imported).toBe(4);
    expect(written[1]).toEqual({ id: 2, name: "Bob", email: "bob@example.com", note: "" });
    expect(written[2]).toEqual({ id: 3, name: "Carol", email: "carol@example.com", note: "ok" });
  });

  it.each(["empty.csv", "header-only.csv"])("imports nothing from %s, without an error", async (file) => {
    const { report, written } = await importFixture(file);
    expect(report).toEqual({ read: 0, imported: 0, rejected: 0, errors: [] });
    expect(written).toEqual([]);
  });

  it("reports an unclosed quote on the line it opens, keeps the rows before it, and returns normally", async () => {
    const { report, written } = await importFixture("unclosed-quote.csv");
    expect(written.map((p) => p.id)).toEqual([1]);
    expect(report).toMatchObject({ read: 2, imported: 1, rejected: 1 });
    expect(report.errors).toHaveLength(1);
    expect(report.errors[0]).toMatchObject({ line: 3, field: "" });
    expect(report.errors[0]!.message).toMatch(/unclosed quote.*rest of the file was not read/);
  });

  it("reports an invalid closing quote on its line and stops there", async () => {
    const { report, written } = await importFixture("bad-closing-quote.csv");
    expect(written.map((p) => p.id)).toEqual([1]);
    expect(report).toMatchObject({ read: 2, imported: 1, rejected: 1 });
    expect(report.errors[0]).toMatchObject({ line: 3 });
    expect(report.errors[0]!.message).toMatch(/invalid closing quote/);
  });

  it("decodes latin1 when told to", async () => {
    const { written } = await importFixture("latin1.csv", { encoding: "latin1" });
    expect(written).toEqual([{ id: 1, name: "Zoë", email: "zoe@example.com", note: "café crème" }]);
  });

  it("honours custom quote and escape characters", async () => {
    const { written } = await importFixture("quote-escape.csv", { quote: "'", escape: "\\" });
    expect(written).toEqual([{ id: 1, name: "O'Brien, Pat", email: "pat@example.com", note: "back\\slash" }]);
  });

  it("takes explicit columns for a file without a header row", async () => {
    const { report, written } = await importFixture("no-header.csv", {
      header: false,
      columns: ["id", "name", "email", "note"],
    });
    expect(report.imported).toBe(2);
    expect(written[0]).toEqual({ id: 1, name: "Alice", email: "alice@example.com", note: "ok" });
  });

  it("uses explicit columns over the header row when both are given", async () => {
    const { importer, written } = collectingImporter();
    const rows: Record<string, string>[] = [];
    const handler = createImportHandler({
      importers: {
        people: { ...importer, validate: (row, line) => (rows.push(row), importer.validate({ id: row.a!, name: row.b!, email: row.c!, note: row.d! }, line)) },
      },
      baseDir: FIXTURES,
    });
    await handler(importPayload({ importer: "people", file: "bom.csv", options: { columns: ["a", "b", "c", "d"] } }));
    expect(rows[0]).toEqual({ a: "1", b: "Alice", c: "alice@example.com", d: "with bom" });
    expect(written).toHaveLength(2);
  });
});
