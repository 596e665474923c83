import { Problems } from "../problems.js";

/** Org slugs become folder names (uploads/<org>/): a strict shape, checked before anything else. */
export const ORG = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;

/** Checks the path parameters every org route has; 400 with all problems at once. */
export function checkPath(params: { org: string; id?: string }, idField?: "id"): Problems {
  const problems = new Problems();
  if (!ORG.test(params.org)) problems.add("org", "must be 1–63 lowercase letters, digits, '-' or '_', starting with a letter or digit");
  if (idField && !ID.test(params.id ?? "")) problems.add("id", "must be 1–100 letters, digits, '.', '-' or '_'");
  return problems;
}
