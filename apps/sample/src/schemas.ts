import { Type, type Static, type TSchema } from "@sinclair/typebox";

// The requests and answers of the sample's routes, as TypeBox schemas: one source for the
// handlers' TypeScript types (Static<…> through the type provider), Fastify's validation (Ajv,
// before the handler runs) and the OpenAPI description at /openapi.json (@fastify/swagger).
// A schema's `description` is also what a failed `pattern` says: "must be <description>".

const ONE_LINE = "^[^\\r\\n]*$";
/** src/contacts.ts's EMAIL, spaces around allowed (the routes trim them). */
const Email = Type.String({
  maxLength: 254,
  pattern: '^\\s*[^\\s@<>()[\\],;:"]+@[^\\s@<>()[\\],;:"]+\\.[^\\s@<>()[\\],;:"]+\\s*$',
  description: "an email address",
});

/** Org slugs become folder names (uploads/<org>/): a strict shape. */
export const Org = Type.String({
  pattern: "^[a-z0-9][a-z0-9_-]{0,62}$",
  description: "1–63 lowercase letters, digits, '-' or '_', starting with a letter or digit",
});
const Id = Type.String({ pattern: "^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$", description: "1–100 letters, digits, '.', '-' or '_'" });

export const OrgParams = Type.Object({ org: Org });
export const CampaignParams = Type.Object({ org: Org, id: Id });
export const JobParams = Type.Object({ org: Org, id: Type.String({ pattern: "^[1-9][0-9]{0,15}$", description: "a job id (a positive integer)" }) });
export const ImportParams = Type.Object({ org: Org, importId: Type.String({ format: "uuid", description: "an import id (a UUID)" }) });
export const ExportFileParams = Type.Object({
  org: Org,
  file: Type.String({ pattern: "^contacts-[0-9a-f-]{36}\\.csv$", description: "an export file name (contacts-<uuid>.csv)" }),
});

export const MAX_RECIPIENTS = 1000;

export const Recipient = Type.Object(
  {
    email: Email,
    name: Type.Optional(Type.String({ maxLength: 200, pattern: ONE_LINE, description: "one line (no CR or LF)" })),
  },
  { additionalProperties: false },
);

export const CampaignBody = Type.Object(
  {
    subject: Type.String({ minLength: 1, maxLength: 200, pattern: ONE_LINE, description: "one line (no CR or LF)" }),
    text: Type.String({ minLength: 1, maxLength: 100_000 }),
    recipients: Type.Array(Recipient, { minItems: 1, maxItems: MAX_RECIPIENTS }),
  },
  { additionalProperties: false },
);
export type CampaignRequest = Static<typeof CampaignBody>;

export const PasswordResetBody = Type.Object({ email: Email }, { additionalProperties: false });

const JobLink = { jobId: Type.Integer(), status: Type.String({ description: "GET this path for the job's state" }) };

export const Accepted = {
  campaign: Type.Object({
    campaign: Type.String(),
    jobIds: Type.Array(Type.Integer()),
    jobs: Type.Array(Type.Object({ email: Type.String(), ...JobLink })),
  }),
  passwordReset: Type.Object(JobLink),
  import: Type.Object({
    importId: Type.String({ format: "uuid" }),
    dryRun: Type.Boolean({ description: "true for a check: the import runs as a dry run and writes nothing" }),
    rejects: Type.String({ description: "GET this path for the rejected rows as a CSV" }),
    ...JobLink,
  }),
  export: Type.Object({ file: Type.String(), download: Type.String(), ...JobLink }),
};

/** A timestamp: a Date in the handler, an ISO 8601 string on the wire (fast-json-stringify writes it). */
const Timestamp = Type.Unsafe<Date | string>({ type: "string", format: "date-time" });

export const JobView = Type.Object({
  id: Type.Integer(),
  task: Type.String(),
  queue: Type.String(),
  status: Type.Union(["pending", "running", "done", "failed", "cancelled"].map((s) => Type.Literal(s))),
  attempts: Type.Integer(),
  maxAttempts: Type.Integer(),
  progress: Type.Unknown(),
  result: Type.Unknown(),
  lastError: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

/** RFC 9457 Problem Details: every error answer, `application/problem+json`. */
export const ProblemSchema = Type.Object({
  type: Type.String(),
  title: Type.String(),
  status: Type.Integer(),
  detail: Type.String(),
  errors: Type.Optional(Type.Array(Type.Object({ field: Type.String({ description: "recipients[2].email, org, content-type…" }), message: Type.String() }))),
});

/** The error answers every route may give, for the OpenAPI description. */
export function problemResponses(...statuses: number[]): Record<number, TSchema> {
  return Object.fromEntries(statuses.map((status) => [status, { ...ProblemSchema, description: "Problem Details (application/problem+json)" }]));
}
