import { describe, expect, it } from "vitest";
import { createImportHandler, importPayload, ImportError, type ImportOptionsInput, type Importer } from "../src/index.js";
import { chooseEncoding, detectDelimiter, notText } from "../src/sniff.js";
import { rejection } from "./support/harness.js";
import { collectingImporter, FIXTURES, validatePerson, type Person } from "./support/people.js";

async function importFixture(file: string, options: ImportOptionsInput = {}, importer?: Importer) {
  const collecting = collectingImporter();
  const handler = createImportHandler({ importers: { people: importer ?? collecting.importer }, baseDir: FIXTURES });
  const report = await handler(importPayload({ importer: "people", file, options }));
  return { report, written: collecting.written };
}

const EXPECTED = [
  { id: 1, name: "Zoë Ångström", email: "zoe@example.com", note: "café crème" },
  { id: 2, name: "Smith, Bob", email: "bob@example.com", note: "costs 5 €" },
];

describe("encodings and delimiters, read from real files", () => {
  it.each([
    ["utf16le-bom.csv", "utf16le", ","],
    ["utf16be-bom.csv", "utf16be", ","],
    ["windows-1252.csv", "windows-1252", ";"],
    ["tab.tsv", "utf8", "\t"],
    ["pipe.csv", "utf8", "|"],
  ])("%s is detected as %s with %j", async (file, encoding, delimiter) => {
    const { report, written } = await importFixture(file);
    expect(report).toMatchObject({ read: 2, imported: 2, rejected: 0, format: { encoding, delimiter } });
    expect(written).toEqual(EXPECTED);
  });

  it("a UTF-8 file with a byte order mark and Excel's semicolons maps its header through aliases", async () => {
    const importer: Importer<Person> = {
      ...collectingImporter().importer,
      header: { required: ["id", "name", "email"], optional: ["note"], aliases: { name: ["Full name"] } },
    };
    const written: Person[] = [];
    importer.writeBatch = async (values) => void written.push(...values);
    const { report } = await importFixture("header-mapped.csv", {}, importer);
    expect(report).toMatchObject({ read: 2, imported: 2, format: { encoding: "utf8", delimiter: ";" } });
    expect(written.map((p) => [p.id, p.name, p.email])).toEqual([
      [1, "Alice", "alice@example.com"],
      [2, "Bob", "bob@example.com"],
    ]);
  });

  it("a declared encoding is used when the file has no byte order mark (Latin-1)", async () => {
    const { report, written } = await importFixture("latin1.csv", { encoding: "latin1" });
    expect(report).toMatchObject({ imported: 1, format: { encoding: "latin1" } });
    expect(written[0]!.name).toBe("Zoë");
  });

  it("a declared delimiter wins over detection", async () => {
    const { report } = await importFixture("pipe.csv", { delimiter: "," });
    expect(report).toMatchObject({ read: 2, imported: 0, rejected: 2, format: { delimiter: "," } });
  });
});

describe("a file that is not CSV fails the job at once, with one message", () => {
  it("a binary file (an image uploaded by mistake)", async () => {
    const error = await rejection(importFixture("picture.png.csv"));
    expect(error).toBeInstanceOf(ImportError);
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/file "picture.png.csv" cannot be imported as CSV: it holds NUL bytes/);
  });

  it("a header without the importer's required columns: what was expected and what was found", async () => {
    const importer: Importer<Person> = {
      validate: validatePerson,
      writeBatch: async () => undefined,
      header: { required: ["id", "name", "email"], optional: ["note"] },
    };
    const error = await rejection(importFixture("wrong-header.csv", {}, importer));
    expect(error.retryable).toBe(false);
    expect(error.message).toBe(
      'the file cannot be imported: the header lacks the required columns "id", "name", "email": expected id, name, email (optional: note); found "sku", "price", "qty"',
    );
  });

  it("a header with two columns that map to the same column (E-mail and Email Address): refused, nothing written", async () => {
    const written: Person[] = [];
    const importer: Importer<Person> = {
      validate: validatePerson,
      writeBatch: async (values) => void written.push(...values),
      header: { required: ["id", "name", "email"], aliases: { email: ["E-mail", "Email Address"] } },
    };
    const error = await rejection(importFixture("header-two-emails.csv", {}, importer));
    expect(error).toBeInstanceOf(ImportError);
    expect(error.retryable).toBe(false);
    expect(error.message).toBe('the file cannot be imported: the header has two columns for "email": "E-mail", "Email Address"');
    expect(written).toEqual([]);
  });

  it("a file whose first record cannot be parsed", async () => {
    const error = await rejection(importFixture("unclosed-quote-first.csv"));
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/^the file cannot be read as CSV: unclosed quote.*\(line 2\)$/);
  });
});

describe("sniffing", () => {
  it("chooses the encoding from a byte order mark, then from UTF-8 validity", () => {
    expect(chooseEncoding(Buffer.from([0xef, 0xbb, 0xbf, 0x61]), "latin1", true)).toEqual({ encoding: "utf8", bomBytes: 3 });
    expect(chooseEncoding(Buffer.from("café", "utf8"), "auto", true)).toEqual({ encoding: "utf8", bomBytes: 0 });
    expect(chooseEncoding(Buffer.from("café", "latin1"), "auto", true)).toEqual({ encoding: "windows-1252", bomBytes: 0 });
    // A sample cut inside a multi-byte character is still UTF-8.
    expect(chooseEncoding(Buffer.from("aé", "utf8").subarray(0, 2), "auto", false).encoding).toBe("utf8");
  });

  it("detects the delimiter that splits every line evenly, ignoring quoted ones", () => {
    expect(detectDelimiter('a;b;c\n"x,y";2;3\n', '"', true)).toBe(";");
    expect(detectDelimiter("a,b\n1,2\n", '"', true)).toBe(",");
    expect(detectDelimiter("single\nvalue\n", '"', true)).toBe(",");
    expect(detectDelimiter("a\tb\tc,d\n1\t2\t3,4\n", '"', true)).toBe("\t");
  });

  it("says why a sample is not text", () => {
    expect(notText("id,name\n1,a\n")).toBeUndefined();
    expect(notText("PK\u0003\u0004\u0014")).toMatch(/control characters/);
  });
});
