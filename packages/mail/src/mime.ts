/**
 * Just enough MIME to find the report parts of a bounce or complaint: headers, multipart
 * boundaries, and the base64 / quoted-printable transfer encodings. Not a general parser.
 */

export interface MimePart {
  /** Header names in lower case; a repeated header keeps its first value. */
  headers: Map<string, string>;
  body: string;
}

/** `Name: value` fields, unfolded, up to the first blank line (or the end). */
export function parseFields(block: string): Map<string, string> {
  const fields = new Map<string, string>();
  const unfolded = block.replace(/\r\n/g, "\n").replace(/\n[ \t]+/g, " ");
  for (const line of unfolded.split("\n")) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!fields.has(name)) fields.set(name, line.slice(colon + 1).trim());
  }
  return fields;
}

export function splitPart(raw: string): MimePart {
  const text = raw.replace(/\r\n/g, "\n");
  const end = text.indexOf("\n\n");
  const head = end === -1 ? text : text.slice(0, end);
  return { headers: parseFields(head), body: end === -1 ? "" : text.slice(end + 2) };
}

/** The media type (lower case) and its parameters (names lower case, quotes removed). */
export function contentType(part: MimePart): { type: string; params: Map<string, string> } {
  const value = part.headers.get("content-type") ?? "text/plain";
  const [type = "", ...rest] = value.split(";");
  const params = new Map<string, string>();
  for (const match of rest.join(";").matchAll(/([A-Za-z0-9_*-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]+)/g)) {
    const raw = match[2]!;
    params.set(match[1]!.toLowerCase(), raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, "$1") : raw);
  }
  return { type: type.trim().toLowerCase(), params };
}

function decode(part: MimePart): string {
  const encoding = (part.headers.get("content-transfer-encoding") ?? "").toLowerCase();
  if (encoding === "base64") return Buffer.from(part.body.replace(/\s+/g, ""), "base64").toString("utf8");
  if (encoding === "quoted-printable") {
    const bytes = part.body.replace(/=\n/g, "").replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    return Buffer.from(bytes, "latin1").toString("utf8");
  }
  return part.body;
}

function children(part: MimePart, boundary: string): MimePart[] {
  const delimiter = `--${boundary}`;
  const lines = part.body.split("\n");
  const parts: string[][] = [];
  let current: string[] | undefined;
  for (const line of lines) {
    const trimmed = line.trimEnd();
    if (trimmed === `${delimiter}--`) break;
    if (trimmed === delimiter) {
      current = [];
      parts.push(current);
    } else current?.push(line);
  }
  return parts.map((p) => splitPart(p.join("\n")));
}

/** Every leaf part of a message, depth first, decoded; `message/*` parts are kept whole, not entered. */
export function leafParts(raw: string): Array<{ type: string; params: Map<string, string>; part: MimePart; content: string }> {
  const out: Array<{ type: string; params: Map<string, string>; part: MimePart; content: string }> = [];
  const walk = (part: MimePart, depth: number): void => {
    const { type, params } = contentType(part);
    const boundary = params.get("boundary");
    if (type.startsWith("multipart/") && boundary && depth < 5) {
      for (const child of children(part, boundary)) walk(child, depth + 1);
    } else {
      out.push({ type, params, part, content: decode(part) });
    }
  };
  walk(splitPart(raw), 0);
  return out;
}
