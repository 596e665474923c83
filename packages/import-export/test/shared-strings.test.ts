// The shared-string table of an XLSX import lives in a temporary file, not in memory: every
// text comes back as it went in, past the write buffer and the read cache, and the file is gone
// once the table is closed.
import { readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { describe, expect, it } from "vitest";
import { SharedStrings } from "../src/shared-strings.js";

const ours = () => new Set(readdirSync(tmpdir()).filter((name) => name.startsWith("forge-xlsx-")));

describe("the shared-string table on disk", () => {
  it("gives back every text, across the write buffer and the read cache (multi-byte, empty, rich text joined)", () => {
    const before = ours();
    const table = new SharedStrings();
    expect(ours().size).toBe(before.size + 1);
    const texts: string[] = [];
    // About 3 MB of text: several flushes of the write buffer, far more texts than the cache holds.
    for (let i = 0; i < 60_000; i++) {
      const text = i % 1000 === 0 ? "" : i % 7 === 0 ? `Zoë Łukasz 東京 ${i} ${"x".repeat(i % 50)}` : `row ${i} ${"é".repeat(i % 13)}`;
      texts.push(text);
      table.push(text);
    }
    table.push({ richText: [{ text: "Ann " }, { font: { bold: true }, text: "Lee" }] });
    table.push(null);
    expect(table.length).toBe(60_002);

    // Random order first (cache misses), then the same again (hits), then a sequential pass.
    const order = Array.from({ length: 5000 }, (_, k) => (k * 7919) % 60_000);
    for (const i of order) expect(table.get(i)).toBe(texts[i]);
    for (const i of order) expect(table.get(i)).toBe(texts[i]);
    for (let i = 0; i < 60_000; i += 1) if (table.get(i) !== texts[i]) expect(table.get(i)).toBe(texts[i]);
    expect(table.get(60_000)).toBe("Ann Lee");
    expect(table.get(60_001)).toBe("");
    expect(table.get(60_002)).toBeUndefined();
    expect(table.get(-1)).toBeUndefined();

    // As exceljs's reader uses it: an array it pushes onto and indexes.
    const array = table.asArray();
    array.push("last");
    expect(array[60_002]).toBe("last");
    expect(array.length).toBe(60_003);

    table.close();
    table.close();
    expect(ours()).toEqual(before);
  });
});
