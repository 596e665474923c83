import { writeFile } from "node:fs/promises";
import { Readable } from "node:stream";
import { buffer } from "node:stream/consumers";
import { crc32, createDeflateRaw } from "node:zlib";

/**
 * Workbooks written byte by byte, for what exceljs will not write: a sheet whose XML inflates
 * to a gigabyte from a megabyte of zip (a zip bomb), built at run time rather than committed.
 */

/** A part's content: text, or chunks produced as the part is compressed (never all in memory). */
export type Part = string | (() => Iterable<Buffer>);

interface Stored {
  name: Buffer;
  data: Buffer;
  crc: number;
  size: number;
}

async function deflate(part: Part): Promise<{ data: Buffer; crc: number; size: number }> {
  let crc = 0;
  let size = 0;
  const chunks = typeof part === "string" ? [Buffer.from(part, "utf8")] : part();
  function* counted(): Iterable<Buffer> {
    for (const chunk of chunks) {
      crc = crc32(chunk, crc);
      size += chunk.length;
      yield chunk;
    }
  }
  const data = await buffer(Readable.from(counted()).pipe(createDeflateRaw({ level: 9 })));
  return { data, crc, size };
}

/** Writes a zip of `parts` (name → content), in that order, deflated, without data descriptors. */
export async function writeZip(file: string, parts: ReadonlyArray<readonly [string, Part]>): Promise<void> {
  const stored: Stored[] = [];
  for (const [name, part] of parts) stored.push({ name: Buffer.from(name, "utf8"), ...(await deflate(part)) });
  const out: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const entry of stored) {
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0, 6);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(0, 10);
    local.writeUInt32LE(entry.crc >>> 0, 14);
    local.writeUInt32LE(entry.data.length, 18);
    local.writeUInt32LE(entry.size, 22);
    local.writeUInt16LE(entry.name.length, 26);
    local.writeUInt16LE(0, 28);
    const header = Buffer.alloc(46);
    header.writeUInt32LE(0x02014b50, 0);
    header.writeUInt16LE(20, 4);
    header.writeUInt16LE(20, 6);
    header.writeUInt16LE(0, 8);
    header.writeUInt16LE(8, 10);
    header.writeUInt32LE(0, 12);
    header.writeUInt32LE(entry.crc >>> 0, 16);
    header.writeUInt32LE(entry.data.length, 20);
    header.writeUInt32LE(entry.size, 24);
    header.writeUInt16LE(entry.name.length, 28);
    header.writeUInt32LE(offset, 42);
    central.push(header, entry.name);
    out.push(local, entry.name, entry.data);
    offset += local.length + entry.name.length + entry.data.length;
  }
  const directory = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(stored.length, 8);
  end.writeUInt16LE(stored.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  await writeFile(file, Buffer.concat([...out, directory, end]));
}

const esc = (text: string): string => text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");

/** A row of inline-string cells, as the sheet's XML holds it. */
export function rowXml(number: number, cells: readonly string[]): string {
  const columns = cells.map((text, i) => `<c r="${String.fromCharCode(65 + i)}${number}" t="inlineStr"><is><t>${esc(text)}</t></is></c>`);
  return `<row r="${number}">${columns.join("")}</row>`;
}

export const SHEET_OPEN =
  '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>';
export const SHEET_CLOSE = "</sheetData></worksheet>";

/**
 * The parts of a one-sheet workbook ("Sheet1") around `sheet`, and `sharedStrings` when given;
 * `sheetFirst` stores the sheet before the workbook's other parts (exceljs then sets it aside in a temporary file).
 */
export function workbookParts(sheet: Part, options: { sharedStrings?: Part; sheetFirst?: boolean } = {}): Array<[string, Part]> {
  const sheetPart: [string, Part] = ["xl/worksheets/sheet1.xml", sheet];
  const parts: Array<[string, Part]> = [
    [
      "[Content_Types].xml",
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
    ],
    [
      "_rels/.rels",
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>',
    ],
  ];
  if (options.sheetFirst) parts.push(sheetPart);
  parts.push(
    [
      "xl/workbook.xml",
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>',
    ],
    [
      "xl/_rels/workbook.xml.rels",
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>',
    ],
  );
  if (options.sharedStrings !== undefined) parts.push(["xl/sharedStrings.xml", options.sharedStrings]);
  if (!options.sheetFirst) parts.push(sheetPart);
  return parts;
}

/** `bytes` of "a", in chunks of 1 MiB: the inside of a cell that inflates to that size. */
export function* filler(bytes: number): Iterable<Buffer> {
  const mib = Buffer.alloc(1 << 20, "a");
  for (let left = bytes; left > 0; left -= mib.length) yield left >= mib.length ? mib : mib.subarray(0, left);
}
