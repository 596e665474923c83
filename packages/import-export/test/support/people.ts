import { fileURLToPath } from "node:url";
import type { FieldError, Importer, Validation } from "../../src/index.js";

export const FIXTURES = fileURLToPath(new URL("../fixtures/", import.meta.url));

export interface Person {
  id: number;
  name: string;
  email: string;
  note: string;
}

export function validatePerson(row: Record<string, string>): Validation<Person> {
  const errors: FieldError[] = [];
  const id = Number(row.id);
  if (!/^\d+$/.test(row.id ?? "")) errors.push({ field: "id", message: "must be a whole number" });
  if (!row.name) errors.push({ field: "name", message: "is required" });
  if (!row.email?.includes("@")) errors.push({ field: "email", message: "must be an email address" });
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: { id, name: row.name!, email: row.email!, note: row.note ?? "" } };
}

/** An importer that keeps what it is given, batch by batch, with the tx each batch came with. */
export function collectingImporter() {
  const written: Person[] = [];
  const batches: Person[][] = [];
  const txs: unknown[] = [];
  const importer: Importer<Person> = {
    validate: validatePerson,
    async writeBatch(values, tx) {
      batches.push([...values]);
      txs.push(tx);
      written.push(...values);
    },
  };
  return { importer, written, batches, txs };
}

export function peopleCsv(count: number, invalidEvery = 0): string {
  const lines = ["id,name,email,note"];
  for (let i = 1; i <= count; i++) {
    const bad = invalidEvery > 0 && i % invalidEvery === 0;
    lines.push(`${i},Person ${i},${bad ? "no-at-sign" : `p${i}@example.com`},"note ${i}"`);
  }
  return `${lines.join("\n")}\n`;
}
