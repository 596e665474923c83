import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createImportHandler, importPayload } from "../src/index.js";
import { SNIFF_BYTES } from "../src/sniff.js";
import { withTempDir } from "./support/harness.js";
import { collectingImporter } from "./support/people.js";

/** The size of the chunks the file is read in (fs.createReadStream's default): where a character may be split. */
const CHUNK = 64 * 1024;

/** ASCII rows `id,Person id,p<id>@example.com,pad` up to `bytes`, the last one padded to end exactly there. */
function asciiRows(firstId: number, bytes: number): { text: string; rows: number } {
  let text = "";
  let id = firstId;
  for (;;) {
    const row = `${id},Person ${id},p${id}@example.com,`;
    if (text.length + row.length + 80 > bytes) {
      text += `${row}${"x".repeat(bytes - text.length - row.length - 1)}\n`;
      return { text, rows: id - firstId + 1 };
    }
    text += `${row}note\n`;
    id += 1;
  }
}

/**
 * A file whose first `SNIFF_BYTES` are ASCII (so the sniff says UTF-8), followed by `tail`
 * bytes: the shape of a Windows-1252 export whose first accented letter comes late.
 */
function lateBytes(tail: Buffer): { file: Buffer; headLines: number } {
  const header = "id,name,email,note\n";
  const { text, rows } = asciiRows(1, SNIFF_BYTES - header.length);
  return { file: Buffer.concat([Buffer.from(header + text, "ascii"), tail]), headLines: 1 + rows };
}

async function importBytes(dir: string, bytes: Buffer, options: { rejectsFile?: string } = {}) {
  await writeFile(path.join(dir, "upload.csv"), bytes);
  const collecting = collectingImporter();
  const handler = createImportHandler({ importers: { people: collecting.importer }, baseDir: dir, maxErrors: 10 });
  const report = await handler(importPayload({ importer: "people", file: "upload.csv", ...options }));
  return { report, written: collecting.written };
}

describe("invalid UTF-8 after the sniffed sample is a rejected row at its line, never silently replaced", () => {
  it("a Windows-1252 é past the first 64 KiB of an ASCII file: its row is rejected, the others imported", async () => {
    await withTempDir(async (dir) => {
      const { file, headLines } = lateBytes(
        Buffer.concat([Buffer.from("900001,caf", "ascii"), Buffer.from([0xe9]), Buffer.from(",c@example.com,x\n900002,Ok,ok@example.com,x\n")]),
      );
      expect(file.subarray(0, SNIFF_BYTES).every((b) => b < 0x80)).toBe(true);
      const { report, written } = await importBytes(dir, file, { rejectsFile: "rejects.csv" });
      expect(report).toMatchObject({ read: headLines + 1, imported: headLines, rejected: 1, format: { encoding: "utf8" } });
      expect(report.errors).toEqual([
        {
          line: headLines + 1,
          field: "",
          message:
            'invalid UTF-8: the line holds bytes that are not text in UTF-8 (a file saved as Windows-1252 or Latin-1?); re-save the file as UTF-8, or import it with options.encoding "windows-1252" or "latin1"',
        },
      ]);
      expect(written.some((p) => p.name.includes("\ufffd"))).toBe(false);
      expect(written.at(-1)).toEqual({ id: 900002, name: "Ok", email: "ok@example.com", note: "x" });
      const rejects = await readFile(path.join(dir, "rejects.csv"), "utf8");
      expect(rejects.split("\n")[1]).toMatch(new RegExp(`^900001,caf\ufffd,c@example.com,x,${headLines + 1},"invalid UTF-8: `));
    });
  });

  it("a character split across two chunks of the read is not reported; an invalid sequence across one is, on its own line", async () => {
    await withTempDir(async (dir) => {
      const parts: Buffer[] = [];
      let size = 0;
      let lines = 0;
      let nextId = 1;
      const push = (bytes: Buffer | string): void => {
        const buffer = typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes;
        parts.push(buffer);
        size += buffer.length;
      };
      const rowsUpTo = (end: number): void => {
        const { text, rows } = asciiRows(nextId, end - size);
        push(text);
        nextId += rows;
        lines += rows;
      };
      push("id,name,email,note\n");
      lines += 1;
      rowsUpTo(CHUNK - 10);
      // The 4-byte emoji starts 2 bytes before the end of the first chunk.
      push("100001,a😀,e@example.com,x\n");
      lines += 1;
      rowsUpTo(2 * CHUNK - 40);
      // A CR ends the second chunk and its LF starts the third: one line break, not two.
      push("200001,b,f@example.com,");
      push("y".repeat(2 * CHUNK - 1 - size));
      push("\r\n");
      lines += 1;
      rowsUpTo(3 * CHUNK - 200);
      // An invalid lead byte (E9, Windows-1252 é) is the last byte of the fourth chunk, ASCII follows it.
      push("300001,");
      push("z".repeat(3 * CHUNK - 1 - size));
      push(Buffer.from([0xe9]));
      push("t,g@example.com,x\n");
      lines += 1;
      const badLine = lines;
      push("500001,Last,l@example.com,x\n");
      lines += 1;
      const bytes = Buffer.concat(parts);
      expect(bytes.indexOf(Buffer.from("😀", "utf8"))).toBe(CHUNK - 2);
      expect([bytes[2 * CHUNK - 1], bytes[2 * CHUNK]]).toEqual([0x0d, 0x0a]);
      expect(bytes[3 * CHUNK - 1]).toBe(0xe9);

      const { report, written } = await importBytes(dir, bytes);
      expect(report).toMatchObject({ read: lines - 1, imported: lines - 2, rejected: 1 });
      expect(report.errors).toEqual([{ line: badLine, field: "", message: expect.stringMatching(/^invalid UTF-8: /) }]);
      expect(written.find((p) => p.id === 100001)?.name).toBe("a😀");
      expect(written.some((p) => p.id === 300001)).toBe(false);
      expect(written.at(-1)?.id).toBe(500001);
    });
  });

  it("a real U+FFFD in the file is text, not an error; invalid bytes inside a quoted multi-line field report the line the record starts on", async () => {
    await withTempDir(async (dir) => {
      const { file, headLines } = lateBytes(
        Buffer.concat([
          Buffer.from("900001,Replacement \ufffd char,r@example.com,x\n", "utf8"),
          Buffer.from('900002,Multi,m@example.com,"one\ntwo ', "ascii"),
          Buffer.from([0xff, 0xfe]),
          Buffer.from('\nthree"\n900003,Overlong,o@example.com,', "ascii"),
          Buffer.from([0xc0, 0xaf]),
          Buffer.from("\n", "ascii"),
        ]),
      );
      const { report, written } = await importBytes(dir, file);
      expect(report).toMatchObject({ read: headLines + 2, imported: headLines, rejected: 2 });
      expect(report.errors.map((e) => e.line)).toEqual([headLines + 2, headLines + 5]);
      expect(written.find((p) => p.id === 900001)?.name).toBe("Replacement \ufffd char");
    });
  });
});
