/**
 * Why an address is on the suppression list. `unsubscribe` holds back bulk mail only (a
 * message with a `List-Unsubscribe` header); the others hold back every message.
 */
export type SuppressionReason = "hard-bounce" | "complaint" | "unsubscribe" | "manual";

export const SUPPRESSION_REASONS: readonly SuppressionReason[] = ["hard-bounce", "complaint", "unsubscribe", "manual"];

/** What `add` takes: the address, why, and a line of detail for people (a DSN status, a note). */
export interface SuppressionInput {
  address: string;
  reason: SuppressionReason;
  detail?: string | undefined;
}

/** One row of the list, as `list` returns it. */
export interface SuppressionEntry {
  address: string;
  reason: SuppressionReason;
  detail: string | null;
  createdAt: Date;
}

/** A suppressed address found by `isSuppressed`, as the handler reports it in its result. */
export interface SuppressedRecipient {
  address: string;
  reason: SuppressionReason;
}

export interface SuppressionListQuery {
  /** Only entries with this reason. */
  reason?: SuppressionReason | undefined;
  /** Entries whose address sorts after this one (keyset pagination: pass the last address of the page before). */
  after?: string | undefined;
  /** Page size; default 100, at most 1000. */
  limit?: number | undefined;
}

/**
 * The addresses never to mail. The handler consults it before every send; bounce and
 * complaint handlers and the unsubscribe endpoint feed it. Addresses are compared in
 * lower case (`suppressionKey`).
 */
export interface SuppressionList {
  /** The given addresses that are on the list, with their reason (addresses as given). */
  isSuppressed(addresses: readonly string[]): Promise<SuppressedRecipient[]>;
  /**
   * Adds entries; an address already listed keeps its first reason, except that an
   * `unsubscribe` entry is replaced by a bounce, complaint or manual one (which hold back more).
   */
  add(entries: readonly SuppressionInput[]): Promise<void>;
  /** Removes addresses (e.g. a person asked to receive mail again); resolves with how many were listed. */
  remove(addresses: readonly string[]): Promise<number>;
  /** A page of entries, ordered by address. */
  list(query?: SuppressionListQuery): Promise<SuppressionEntry[]>;
}

/** The form an address is stored and compared in: trimmed, lower case. */
export function suppressionKey(address: string): string {
  return address.trim().toLowerCase();
}

export function isSuppressionReason(value: unknown): value is SuppressionReason {
  return typeof value === "string" && (SUPPRESSION_REASONS as readonly string[]).includes(value);
}

/** Whether an entry with this reason holds back this message. */
export function suppresses(reason: SuppressionReason, bulk: boolean): boolean {
  return reason !== "unsubscribe" || bulk;
}
