/**
 * CI mode (the default) keeps every count small enough for the whole folder to run in a few
 * minutes on two cores; FORGE_RELIABILITY_LONG=1 turns the counts up to the full soak.
 */
export const LONG = process.env.FORGE_RELIABILITY_LONG === "1";

/** `ci` in a normal run, `long` in a soak. */
export function scaled(ci: number, long: number): number {
  return LONG ? long : ci;
}

/** A test timeout that grows with the counts. */
export function timeoutMs(ciSeconds: number, longSeconds: number): number {
  return scaled(ciSeconds, longSeconds) * 1000;
}
