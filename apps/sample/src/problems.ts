import type { FastifyError, FastifyInstance, FastifyReply } from "fastify";

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

/** Every error becomes a problem+json answer; the 500 says nothing of the internals (they go to the log). */
export function installProblemHandlers(app: FastifyInstance): void {
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, { type: PROBLEM_TYPES.notFound, title: "Not Found", status: 404, detail: `No route ${request.method} ${request.url.split("?")[0]}` }),
  );
  app.setErrorHandler((error: FastifyError | ProblemError, request, reply) => {
    if (error instanceof ProblemError) return sendProblem(reply, error.problem);
    const status = error.statusCode ?? 500;
    if (status === 413) {
      return sendProblem(reply, { type: PROBLEM_TYPES.tooLarge, title: "Payload Too Large", status, detail: "The request body is over the size limit." });
    }
    if (status === 415) {
      return sendProblem(reply, { type: PROBLEM_TYPES.unsupported, title: "Unsupported Media Type", status, detail: error.message });
    }
    if (status >= 400 && status < 500) {
      // Fastify's own 4xx: a body that is not JSON, a bad header…
      return sendProblem(reply, {
        type: PROBLEM_TYPES.validation,
        title: "Invalid request",
        status,
        detail: error.message,
        errors: [{ field: "body", message: error.message }],
      });
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
