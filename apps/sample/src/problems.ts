import type { Duplex } from "node:stream";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { APP_DIR } from "./config.js";

/** One thing wrong with a request: where (`recipients[2].email`) and what. */
export interface FieldProblem {
  field: string;
  message: string;
}

/** RFC 9457 Problem Details, as sent with `application/problem+json`. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: FieldProblem[];
}

export const PROBLEM_TYPES = {
  validation: "urn:forge-sample:problem:invalid-request",
  notFound: "urn:forge-sample:problem:not-found",
  unauthorized: "urn:forge-sample:problem:unauthorized",
  tooLarge: "urn:forge-sample:problem:payload-too-large",
  unsupported: "urn:forge-sample:problem:unsupported-media-type",
  internal: "urn:forge-sample:problem:internal-error",
} as const;

/** Thrown by route code; the error handler turns it into the response. */
export class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail);
  }
}

export function invalid(detail: string, errors: FieldProblem[]): ProblemError {
  return new ProblemError({ type: PROBLEM_TYPES.validation, title: "Invalid request", status: 400, detail, errors });
}

export function notFound(detail: string): ProblemError {
  return new ProblemError({ type: PROBLEM_TYPES.notFound, title: "Not Found", status: 404, detail });
}

export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  return reply.code(problem.status).type("application/problem+json").send(problem);
}

/**
 * Collects the problems of one request, field by field, so the answer lists all of them
 * at once instead of one per round trip.
 */
export class Problems {
  readonly list: FieldProblem[] = [];

  add(field: string, message: string): void {
    this.list.push({ field, message });
  }

  /** Throws a 400 when anything was added. */
  check(detail: string): void {
    if (this.list.length > 0) throw invalid(detail, this.list);
  }
}

/** What Ajv reports for one failed keyword (Fastify's `error.validation`, Ajv run with `verbose`). */
interface SchemaIssue {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
  parentSchema?: { description?: string; properties?: Record<string, unknown> };
  data?: unknown;
}

/** `/recipients/2/email` (+ the missing or unknown property) → `recipients[2].email`; the root is `body` (or `org`… for params). */
function fieldOf(context: string, issue: SchemaIssue): string {
  const parts = issue.instancePath
    .split("/")
    .slice(1)
    .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
  if (issue.keyword === "required") parts.push(String(issue.params.missingProperty));
  if (issue.keyword === "additionalProperties") parts.push(String(issue.params.additionalProperty));
  const field = parts.reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), "");
  return field || context;
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

/** What a failed keyword means, said for a person: the field's expected type, limit or shape. */
function messageOf(issue: SchemaIssue): string {
  const { params, parentSchema } = issue;
  const limit = Number(params.limit);
  switch (issue.keyword) {
    case "required":
      return "is required";
    case "additionalProperties":
      return `is not a known field (${Object.keys(parentSchema?.properties ?? {}).join(", ")})`;
    case "type":
      return `must be ${String(params.type) === "object" || String(params.type) === "array" || String(params.type) === "integer" ? `an ${String(params.type)}` : `a ${String(params.type)}`}, not ${kindOf(issue.data)}`;
    case "minLength":
      return limit === 1 ? "must not be empty" : `must be at least ${limit} characters`;
    case "maxLength":
      return `is longer than ${limit} characters`;
    case "minItems":
      return limit === 1 ? "must have at least one entry" : `must have at least ${limit} entries`;
    case "maxItems":
      return `has more than ${limit} entries`;
    case "pattern":
      return parentSchema?.description ? `must be ${parentSchema.description}` : `must match ${String(params.pattern)}`;
    case "format":
      return `${JSON.stringify(issue.data)} is not ${parentSchema?.description ?? `a valid ${String(params.format)}`}`;
    default:
      return issue.message ?? `fails ${issue.keyword}`;
  }
}

/** Fastify's schema validation error as field problems, every one of them (Ajv runs with allErrors). */
export function schemaProblems(error: { validation: SchemaIssue[]; validationContext?: string }): FieldProblem[] {
  const context = error.validationContext ?? "body";
  return error.validation.map((issue) => ({ field: fieldOf(context, issue), message: messageOf(issue) }));
}

// A server's own paths (and file: URLs) in an error message tell a client how the machine is
// laid out: cut them out of anything that reaches the browser. The full error goes to the log.
// The path is taken whole from where it starts (a server may live under any folder, /check/work/app
// as well as /home/u/app), so a known root anywhere in it marks it; URL paths have none ("/orgs/acme").
const SERVER_PATH =
  /(?:file:\/\/)?(?:[A-Za-z]:\\|(?<![\w.~-])\/(?:[^\s'"`),/]+\/)*?(?:home|root|usr|opt|var|tmp|srv|work|workspace|private|Users|app|mnt|etc|proc|run|data|builds?|node_modules)\/)[^\s'"`),]*/g;

/** `text` with absolute server paths replaced by "…"; also the app's own folder and the working directory. */
export function withoutServerPaths(text: string): string {
  let out = text.replace(SERVER_PATH, "…");
  // An app under a folder the pattern does not know (/srv9/x): its own folders go by name.
  for (const root of [APP_DIR, process.cwd()].sort((a, b) => b.length - a.length)) if (root.length > 1) out = out.split(root).join("…");
  return out.replace(/…[/\\][^\s'"`),]*/g, "…");
}

const CLIENT_ERRORS: Record<string, { status: number; title: string; detail: string; field: string }> = {
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, title: "URI Too Long", detail: "A path segment of this URL is longer than any this API accepts.", field: "path" },
  FST_ERR_BAD_URL: { status: 400, title: "Invalid request", detail: "The URL is not valid (a broken percent-encoding).", field: "path" },
};

/**
 * Errors Fastify meets before a route runs (a URL too long: 414, a broken URL: 400), and the
 * ones Node's parser meets before Fastify (headers too large: 431), as problem+json too.
 */
export function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const known = CLIENT_ERRORS[error.code];
  if (known) {
    void sendProblem(reply, {
      type: PROBLEM_TYPES.validation,
      title: known.title,
      status: known.status,
      detail: known.detail,
      errors: [{ field: known.field, message: known.detail }],
    });
    return;
  }
  const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 400;
  void sendProblem(reply, { type: PROBLEM_TYPES.validation, title: "Invalid request", status, detail: withoutServerPaths(error.message) });
}

export function clientErrorHandler(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === "ECONNRESET" || socket.destroyed || !socket.writable) return;
  const [status, title, detail] =
    error.code === "HPE_HEADER_OVERFLOW"
      ? [431, "Request Header Fields Too Large", "The request's headers are larger than the server accepts."]
      : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? [408, "Request Timeout", "The request took too long to arrive."]
        : [400, "Bad Request", "The request could not be parsed as HTTP."];
  const body = JSON.stringify({ type: PROBLEM_TYPES.validation, title, status, detail });
  socket.end(
    `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Every error becomes a problem+json answer naming its field: schema validation (400, each
 * field), a body that is not JSON (400, `body`), a content type no route takes (415,
 * `content-type`), too large (413). A 500 says nothing of the internals (stack, paths): they go
 * to the log.
 */
export function installProblemHandlers(app: FastifyInstance): void {
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, { type: PROBLEM_TYPES.notFound, title: "Not Found", status: 404, detail: `No route ${request.method} ${request.url.split("?")[0]}` }),
  );
  app.setErrorHandler((error: FastifyError | ProblemError, request, reply) => {
    if (error instanceof ProblemError) return sendProblem(reply, error.problem);
    if (error.validation) {
      return sendProblem(reply, {
        type: PROBLEM_TYPES.validation,
        title: "Invalid request",
        status: 400,
        detail: `The request ${error.validationContext === "params" ? "path" : (error.validationContext ?? "body")} does not match the schema (see /openapi.json).`,
        errors: schemaProblems(error as { validation: SchemaIssue[]; validationContext?: string }),
      });
    }
    const status = error.statusCode ?? 500;
    if (status === 413) {
      return sendProblem(reply, {
        type: PROBLEM_TYPES.tooLarge,
        title: "Payload Too Large",
        status,
        detail: "The request body is over the size limit.",
        errors: [{ field: "body", message: "is over the size limit" }],
      });
    }
    if (status === 415) {
      const detail = withoutServerPaths(error.message);
      return sendProblem(reply, {
        type: PROBLEM_TYPES.unsupported,
        title: "Unsupported Media Type",
        status,
        detail,
        errors: [{ field: "content-type", message: `${JSON.stringify(request.headers["content-type"] ?? "")} is not a content type this route accepts` }],
      });
    }
    if (status >= 400 && status < 500) {
      // Fastify's own 4xx: a body that is not JSON, an empty JSON body…
      const detail = withoutServerPaths(error.message);
      return sendProblem(reply, { type: PROBLEM_TYPES.validation, title: "Invalid request", status, detail, errors: [{ field: "body", message: detail }] });
    }
    request.log.error({ err: error }, "request failed");
    return sendProblem(reply, {
      type: PROBLEM_TYPES.internal,
      title: "Internal Server Error",
      status: 500,
      detail: "The request failed; the error is in the server log.",
    });
  });
}
