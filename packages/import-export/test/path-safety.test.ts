import { mkdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createImportHandler, importPayload, ImportError } from "../src/index.js";
import { resolveExistingFile, resolveNewFile } from "../src/path-safety.js";
import { collectingImporter } from "./support/people.js";
import { rejection, withTempDir } from "./support/harness.js";

/** base/ holds data.csv, link-in -> data.csv, link-out -> ../outside.csv, dir-out -> .. */
async function layout(root: string) {
  const base = path.join(root, "base");
  await mkdir(path.join(base, "sub"), { recursive: true });
  await writeFile(path.join(base, "data.csv"), "id,name,email,note\n1,A,a@example.com,x\n");
  await writeFile(path.join(root, "outside.csv"), "id,name,email,note\n9,Secret,s@example.com,x\n");
  await symlink(path.join(base, "data.csv"), path.join(base, "link-in.csv"));
  await symlink(path.join(root, "outside.csv"), path.join(base, "link-out.csv"));
  await symlink(root, path.join(base, "dir-out"));
  return base;
}

describe("path safety", () => {
  it("resolves files inside baseDir, through symlinks that stay inside", async () => {
    await withTempDir(async (root) => {
      const base = await layout(root);
      for (const file of ["data.csv", "sub/../data.csv", "link-in.csv", path.join(base, "data.csv")]) {
        const result = await resolveExistingFile(base, file);
        expect(result).toEqual({ ok: true, path: path.join(base, "data.csv") });
      }
    });
  });

  it("refuses .., absolute paths elsewhere and symlinks that leave baseDir, as not retryable", async () => {
    await withTempDir(async (root) => {
      const base = await layout(root);
      for (const file of ["../outside.csv", "sub/../../outside.csv", path.join(root, "outside.csv"), "link-out.csv", "dir-out/outside.csv", ".", ""]) {
        const result = await resolveExistingFile(base, file);
        expect(result, file).toMatchObject({ ok: false, retryable: false });
      }
    });
  });

  it("reports a missing file or base directory as retryable", async () => {
    await withTempDir(async (root) => {
      const base = await layout(root);
      expect(await resolveExistingFile(base, "later.csv")).toMatchObject({ ok: false, retryable: true });
      expect(await resolveExistingFile(path.join(root, "no-base"), "data.csv")).toMatchObject({ ok: false, retryable: true });
    });
  });

  it("resolves a new file when its directory is inside baseDir, and refuses one whose directory leaves it", async () => {
    await withTempDir(async (root) => {
      const base = await layout(root);
      expect(await resolveNewFile(base, "sub/out.csv")).toEqual({ ok: true, path: path.join(base, "sub", "out.csv") });
      expect(await resolveNewFile(base, "dir-out/out.csv")).toMatchObject({ ok: false, retryable: false });
      expect(await resolveNewFile(base, "../out.csv")).toMatchObject({ ok: false, retryable: false });
      expect(await resolveNewFile(base, "missing-dir/out.csv")).toMatchObject({ ok: false, retryable: true });
    });
  });

  it("makes the import handler refuse a symlink that leaves baseDir before reading it", async () => {
    await withTempDir(async (root) => {
      const base = await layout(root);
      const { importer, written } = collectingImporter();
      const handler = createImportHandler({ importers: { people: importer }, baseDir: base });
      const error = await rejection(handler(importPayload({ importer: "people", file: "link-out.csv" })));
      expect(error).toBeInstanceOf(ImportError);
      expect(error.retryable).toBe(false);
      expect(written).toEqual([]);
      await handler(importPayload({ importer: "people", file: "link-in.csv" }));
      expect(written.map((p) => p.id)).toEqual([1]);
    });
  });
});
