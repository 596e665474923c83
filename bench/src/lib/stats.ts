export function sorted(values: number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** Nearest-rank percentile of an already sorted list. */
export function percentile(sortedValues: number[], p: number): number {
  if (sortedValues.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sortedValues.length);
  return sortedValues[Math.min(sortedValues.length - 1, Math.max(0, rank - 1))] as number;
}

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const s = sorted(values);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs `fn` over `items` with at most `limit` at once. */
export async function mapLimit<T>(items: readonly T[], limit: number, fn: (item: T) => unknown): Promise<void> {
  if (limit >= items.length) {
    await Promise.all(items.map(fn));
    return;
  }
  let next = 0;
  const lanes = Array.from({ length: limit }, async () => {
    while (next < items.length) await fn(items[next++] as T);
  });
  await Promise.all(lanes);
}

/** Round-robin order: round r starts at system r, so no system always runs first. */
export function rotate<T>(items: readonly T[], round: number): T[] {
  const k = round % Math.max(1, items.length);
  return [...items.slice(k), ...items.slice(0, k)];
}
