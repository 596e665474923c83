import { JobError } from "../base/errors.js";
import type { DependencyFailurePolicy } from "../core/options.js";
import { describe } from "../base/validate.js";

/**
 * The dependency options of one enqueue call, checked before anything is written: `dependsOn`
 * (job ids, or in `enqueueMany` the `ref` of another item of the call), `onDependencyFailure`,
 * and `ref`. Pure: the database checks (ids exist, same tenant) are flow-enqueue.ts's.
 */

export const DEPENDENCY_FAILURE_POLICIES: readonly DependencyFailurePolicy[] = ["fail", "cancel", "run", "hold"];
/** Dependencies one job may list: the edges are written per job, and a larger fan-in is a batch's work. */
export const MAX_DEPENDENCIES = 1000;

/** One item's dependencies, resolved within the call. */
export interface FlowItem {
  /** Indexes of items of this call it depends on. */
  local: number[];
  /** Ids of existing jobs it depends on. */
  existing: number[];
  policy: DependencyFailurePolicy;
  /** Whether it lists any dependency at all (dependsOn not empty). */
  dependent: boolean;
  /** Whether another item of the call depends on it. */
  referenced: boolean;
}

export interface FlowPlan {
  items: FlowItem[];
  /** Item indexes, every item after the items it depends on. */
  order: number[];
  /** Every existing job id named, once. */
  existingIds: number[];
}

interface FlowOptions {
  ref?: unknown;
  dependsOn?: unknown;
  onDependencyFailure?: unknown;
  idempotencyKey?: unknown;
  dedupKey?: unknown;
  throttle?: unknown;
}

/** null when no item uses dependencies or refs: the call is an ordinary enqueue. */
export function readFlowPlan(options: readonly FlowOptions[], field: (index: number, name: string) => string): FlowPlan | null {
  if (!options.some((o) => o.dependsOn !== undefined || o.ref !== undefined || o.onDependencyFailure !== undefined)) return null;
  const refs = new Map<string, number>();
  options.forEach((o, i) => {
    if (o.ref === undefined) return;
    if (typeof o.ref !== "string" || o.ref === "") throw new JobError(`${field(i, "ref")} must be a non-empty string, got ${describe(o.ref)}`, field(i, "ref"));
    const before = refs.get(o.ref);
    if (before !== undefined) {
      throw new JobError(
        `${field(i, "ref")} ${JSON.stringify(o.ref)} is already the ref of ${field(before, "ref")}; refs must be unique within one call`,
        field(i, "ref"),
      );
    }
    refs.set(o.ref, i);
  });
  const items = options.map((o, i) => readItem(o, i, refs, field));
  for (const item of items) for (const j of item.local) (items[j] as FlowItem).referenced = true;
  options.forEach((o, i) => {
    const keyed =
      (o.idempotencyKey !== undefined && o.idempotencyKey !== null && o.idempotencyKey !== "") ||
      (o.dedupKey !== undefined && o.dedupKey !== null && o.dedupKey !== "") ||
      o.throttle !== undefined;
    const item = items[i] as FlowItem;
    if (keyed && (item.dependent || item.referenced)) {
      throw new JobError(
        `${field(i, item.dependent ? "dependsOn" : "ref")}: a job in a flow cannot also have an idempotencyKey, dedupKey or throttle (an existing job could stand in for it); enqueue the keyed job first and pass its id in dependsOn`,
        field(i, item.dependent ? "dependsOn" : "ref"),
      );
    }
  });
  return { items, order: topologicalOrder(items, options, field), existingIds: [...new Set(items.flatMap((item) => item.existing))] };
}

function readItem(o: FlowOptions, i: number, refs: Map<string, number>, field: (index: number, name: string) => string): FlowItem {
  const item: FlowItem = { local: [], existing: [], policy: "fail", dependent: false, referenced: false };
  if (o.onDependencyFailure !== undefined) {
    if (!DEPENDENCY_FAILURE_POLICIES.includes(o.onDependencyFailure as DependencyFailurePolicy)) {
      throw new JobError(
        `${field(i, "onDependencyFailure")} must be "fail", "cancel", "run" or "hold", got ${describe(o.onDependencyFailure)}`,
        field(i, "onDependencyFailure"),
      );
    }
    item.policy = o.onDependencyFailure as DependencyFailurePolicy;
  }
  if (o.dependsOn === undefined) {
    if (o.onDependencyFailure !== undefined) {
      throw new JobError(
        `${field(i, "onDependencyFailure")} applies only to a job with dependsOn; add dependsOn or remove it`,
        field(i, "onDependencyFailure"),
      );
    }
    return item;
  }
  const name = field(i, "dependsOn");
  if (!Array.isArray(o.dependsOn)) throw new JobError(`${name} must be an array of job ids, got ${describe(o.dependsOn)}`, name);
  if (o.dependsOn.length > MAX_DEPENDENCIES) {
    throw new JobError(
      `${name} lists ${o.dependsOn.length} jobs; the limit is ${MAX_DEPENDENCIES} (for a larger fan-in, use enqueueBatch with onComplete)`,
      name,
    );
  }
  for (const [k, dep] of (o.dependsOn as unknown[]).entries()) {
    if (typeof dep === "number" && Number.isSafeInteger(dep) && dep > 0) {
      if (!item.existing.includes(dep)) item.existing.push(dep);
    } else if (typeof dep === "string") {
      const index = refs.get(dep);
      if (index === undefined) throw new JobError(`${name}[${k}] names ${JSON.stringify(dep)}, which no item of this call has as its ref`, name);
      if (!item.local.includes(index)) item.local.push(index);
    } else {
      throw new JobError(`${name}[${k}] must be a job id (a positive integer)${refs.size > 0 ? " or an item's ref" : ""}, got ${describe(dep)}`, name);
    }
  }
  item.dependent = item.local.length + item.existing.length > 0;
  return item;
}

/** Kahn's order over the call's own edges; what is left over lies on a cycle, which is refused. */
function topologicalOrder(items: FlowItem[], options: readonly FlowOptions[], field: (index: number, name: string) => string): number[] {
  const waitingOn = items.map((item) => item.local.length);
  const dependents = items.map(() => [] as number[]);
  items.forEach((item, i) => item.local.forEach((j) => dependents[j]?.push(i)));
  const order: number[] = [];
  const ready = items.flatMap((_, i) => (waitingOn[i] === 0 ? [i] : []));
  while (ready.length > 0) {
    const i = ready.shift() as number;
    order.push(i);
    for (const d of dependents[i] ?? []) if (--(waitingOn[d] as number) === 0) ready.push(d);
  }
  if (order.length < items.length) {
    const stuck = items.flatMap((_, i) => ((waitingOn[i] as number) > 0 ? [i] : []));
    const names = stuck.map((i) => (typeof options[i]?.ref === "string" ? JSON.stringify(options[i]?.ref) : field(i, "dependsOn")));
    throw new JobError(
      `dependsOn forms a cycle among ${names.join(", ")}: no job of a cycle could ever run; remove one of its edges`,
      field(stuck[0] as number, "dependsOn"),
    );
  }
  return order;
}
