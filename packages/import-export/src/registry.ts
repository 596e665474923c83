import type { JobErrorClass } from "./errors.js";

/**
 * Looks an importer or exporter up by the name in the payload. Unknown names are
 * retryable: during a rolling deploy, another worker may already know the new one.
 */
export function findByName<T>(registry: Readonly<Record<string, T>>, name: string, kind: string, Class: JobErrorClass): T {
  if (Object.prototype.hasOwnProperty.call(registry, name)) return registry[name] as T;
  const known = Object.keys(registry).sort();
  const list = known.length === 0 ? "none are registered" : `known: ${known.join(", ")}`;
  throw new Class(`unknown ${kind} "${name}" (${list})`, { retryable: true });
}
