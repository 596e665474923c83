const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/**
 * Escapes text for HTML element content and double- or single-quoted attribute values.
 * Every string that reaches the page from the database (task, queue, payload, error,
 * worker id) goes through this: the page has no other way to insert text.
 */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

/**
 * Tagged template that escapes every interpolated value, except fragments already built by
 * `html` itself (marked with `Html`): `html\`<td>${job.task}</td>\`` is safe by construction.
 */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += fragment(value) + strings[i + 1]!;
  });
  return new Html(out);
}

function fragment(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(fragment).join("");
  if (value === null || value === undefined || value === false) return "";
  return escapeHtml(value);
}

/** JSON for display, cut to `max` characters (escaping happens when it is interpolated). */
export function shortJson(value: unknown, max = 300): string {
  if (value === null || value === undefined) return "";
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
