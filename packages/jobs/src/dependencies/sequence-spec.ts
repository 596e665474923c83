import { JobError } from "../base/errors.js";
import { checkKnownOptions, checkLength, describe, MAX_FLOW_KEY_LENGTH } from "../base/validate.js";
import { DEFAULT_SEQUENCE_FAILURE, type SequenceFailurePolicy } from "../core/options.js";

/**
 * The `sequence` option of one enqueue call, checked before anything is written. Pure: the
 * key's lock and its last job are sequence-enqueue.ts's.
 */

/** One item's sequence. */
export interface SequenceItem {
  key: string;
  onFailure: SequenceFailurePolicy;
}

const SEQUENCE_FIELDS = ["key", "onFailure"];
const FAILURE_POLICIES: readonly SequenceFailurePolicy[] = ["hold", "continue"];

/**
 * Options a sequenced job cannot have. Its one dependency is the key's previous job, so it
 * takes no other (dependsOn, onDependencyFailure, a ref others depend on: enqueue the
 * dependent afterwards with dependsOn: [id]); an existing job could stand in for a keyed one,
 * which would then never be the key's last (idempotencyKey, dedupKey, throttle, debounce).
 */
const REFUSED = ["dependsOn", "onDependencyFailure", "ref", "idempotencyKey", "dedupKey", "throttle", "debounce"] as const;

type SequenceOptionsOf = { sequence?: unknown } & { [K in (typeof REFUSED)[number]]?: unknown };

/** Each item's sequence (undefined for an item without one), or null when no item has one. */
export function readSequences(options: readonly SequenceOptionsOf[], field: (index: number, name: string) => string): (SequenceItem | undefined)[] | null {
  if (!options.some((o) => o.sequence !== undefined)) return null;
  return options.map((o, i) => (o.sequence === undefined ? undefined : readItem(o, (name) => field(i, name))));
}

function readItem(o: SequenceOptionsOf, field: (name: string) => string): SequenceItem {
  const name = field("sequence");
  const value: unknown = o.sequence;
  let key: unknown = value;
  let onFailure: unknown = undefined;
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    checkKnownOptions(value, SEQUENCE_FIELDS, name);
    ({ key, onFailure } = value as { key?: unknown; onFailure?: unknown });
  } else if (typeof value !== "string") {
    throw new JobError(`${name} must be a key (a string) or { key, onFailure? }, got ${describe(value)}`, name);
  }
  const keyField = typeof value === "string" ? name : `${name}.key`;
  if (typeof key !== "string" || key.length === 0) {
    throw new JobError(`${keyField} must be a non-empty string of at most ${MAX_FLOW_KEY_LENGTH} characters, got ${describe(key)}`, keyField);
  }
  checkLength(key, MAX_FLOW_KEY_LENGTH, keyField);
  if (onFailure !== undefined && !FAILURE_POLICIES.includes(onFailure as SequenceFailurePolicy)) {
    throw new JobError(`${name}.onFailure must be "hold" or "continue", got ${describe(onFailure)}`, `${name}.onFailure`);
  }
  for (const other of REFUSED) {
    const given = o[other];
    if (given === undefined || given === null || given === "") continue;
    throw new JobError(
      `${name} cannot be combined with ${field(other)}: a sequenced job's only dependency is its key's previous job, and it must be a new job of its own; drop one of the two`,
      field(other),
    );
  }
  return { key, onFailure: (onFailure as SequenceFailurePolicy | undefined) ?? DEFAULT_SEQUENCE_FAILURE };
}
