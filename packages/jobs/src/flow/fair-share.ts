/**
 * Which ready jobs a fair claim takes: priorities first; among jobs of equal priority, weighted
 * round-robin over groups counted in slots — the next job goes to the group with the fewest
 * running jobs (those of every worker, buffered ones included) per unit of weight, counting the
 * ones this claim already gave it, so a group with one ready job is served at the next claim
 * whatever another group's backlog; within a group, `id` order. A job whose key has no slot or
 * token left is passed over (its group's next job is considered), never waited for.
 */

/** A ready job the claim may take. */
export interface Candidate {
  id: number;
  priority: number;
  group: string;
  key: string;
}

/** What a limited key allows this claim: free concurrency slots and whole tokens (Infinity when unlimited). */
export interface KeyBudget {
  slots: number;
  tokens: number;
}

export interface FairShareInput {
  candidates: readonly Candidate[];
  /** Running jobs per group in the claimed queues. */
  running: ReadonlyMap<string, number>;
  /** Weight per group (default 1). */
  weights: ReadonlyMap<string, number>;
  /** Budget per limited key; a key not here is unlimited. */
  budgets: ReadonlyMap<string, KeyBudget>;
  limit: number;
  /**
   * How many of the picks start now (default: all). The others are held in the worker's buffer,
   * where they count as running: a job of a limited key is held only while its key keeps a free
   * slot besides (a key's last slot is never held idle in one worker while another could run
   * it), and never when its key has a rate (a held job would sit on a token).
   */
  start?: number;
  /**
   * When the caller last served each group (larger = more recent): between groups equally
   * loaded, the one served longest ago (or never) goes first — a worker that runs one job at a
   * time, whose groups all count 0 running at each claim, still takes turns.
   */
  served?: ReadonlyMap<string, number>;
}

export interface FairShareResult {
  chosen: Candidate[];
  /** Keys that had a ready job passed over for want of a token (their claim may retry once one refills). */
  outOfTokens: Set<string>;
  /** Keys that had a ready job passed over, at their limit or out of tokens. */
  heldBack: Set<string>;
}

interface Best {
  group: string;
  job: Candidate;
  load: number;
  last: number;
}

/** Equal priorities: the lighter load first, then the group served longest ago, then the older job. */
function before(load: number, last: number, id: number, best: Best): boolean {
  if (load !== best.load) return load < best.load;
  if (last !== best.last) return last < best.last;
  return id < best.job.id;
}

function byClaimOrder(a: Candidate, b: Candidate): number {
  return b.priority - a.priority || a.id - b.id;
}

export function fairShare(input: FairShareInput): FairShareResult {
  const queues = new Map<string, Candidate[]>();
  for (const c of [...input.candidates].sort(byClaimOrder)) {
    const list = queues.get(c.group);
    if (list) list.push(c);
    else queues.set(c.group, [c]);
  }
  const budgets = new Map([...input.budgets].map(([key, b]) => [key, { ...b }]));
  const taken = new Map<string, number>();
  const chosen: Candidate[] = [];
  const outOfTokens = new Set<string>();
  const heldBack = new Set<string>();
  const heads = new Map<string, number>([...queues.keys()].map((g) => [g, 0]));

  /** The group's next job its key can take, skipping (and counting) those it cannot. */
  const start = input.start ?? input.limit;
  const head = (group: string): Candidate | null => {
    const list = queues.get(group) as Candidate[];
    let i = heads.get(group) as number;
    while (i < list.length) {
      const c = list[i] as Candidate;
      const budget = budgets.get(c.key);
      if (!budget) break;
      if (budget.slots >= 1 && budget.tokens >= 1) {
        // Picks past `start` are held: only with a slot to spare, and no rate.
        if (chosen.length < start || (budget.slots >= 2 && budget.tokens === Infinity)) break;
        i++;
        continue;
      }
      if (budget.slots >= 1) outOfTokens.add(c.key);
      heldBack.add(c.key);
      i++;
    }
    heads.set(group, i);
    return list[i] ?? null;
  };

  while (chosen.length < input.limit) {
    let best: Best | null = null;
    for (const group of queues.keys()) {
      const job = head(group);
      if (!job) continue;
      const load = ((input.running.get(group) ?? 0) + (taken.get(group) ?? 0) + 1) / (input.weights.get(group) ?? 1);
      const last = taken.has(group) ? Infinity : (input.served?.get(group) ?? -1);
      if (best === null || job.priority > best.job.priority || (job.priority === best.job.priority && before(load, last, job.id, best))) {
        best = { group, job, load, last };
      }
    }
    if (best === null) break;
    chosen.push(best.job);
    heads.set(best.group, (heads.get(best.group) as number) + 1);
    taken.set(best.group, (taken.get(best.group) ?? 0) + 1);
    const budget = budgets.get(best.job.key);
    if (budget) {
      budget.slots--;
      budget.tokens--;
    }
  }
  return { chosen, outOfTokens, heldBack };
}
