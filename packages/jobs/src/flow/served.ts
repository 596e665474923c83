/** Groups a worker (or a drain) recently gave a job to, kept at most this many: the oldest are forgotten first. */
const REMEMBERED = 10_000;

/**
 * When a caller last served each fair-share group, by a counter of its own: the fair claim's
 * turn-taking between groups equally loaded (fair-share.ts). A caller's own memory, not the
 * database's: nothing is written per claim, so no row becomes a point every claim contends on.
 */
export class ServedGroups {
  private count = 0;
  private readonly last = new Map<string, number>();

  note(group: string): void {
    this.last.delete(group); // re-inserted last: Map order is the forgetting order
    this.last.set(group, ++this.count);
    if (this.last.size > REMEMBERED) this.last.delete(this.last.keys().next().value as string);
  }

  get view(): ReadonlyMap<string, number> {
    return this.last;
  }
}
