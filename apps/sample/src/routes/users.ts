import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import type { AppDatabase } from "../db.js";
import { activateUser, signUp } from "../onboarding.js";
import { notFound, ProblemError } from "../problems.js";
import { Org, problemResponses, Recipient } from "../schemas.js";

const UserParams = Type.Object({ org: Org, id: Type.String({ pattern: "^[1-9][0-9]{0,15}$", description: "a user id (a positive integer)" }) });

/**
 * POST /orgs/:org/users `{ email, name? }` — signs a user up: the user's row and its onboarding
 * job (src/onboarding.ts) in one transaction; 201 `{ id, jobId }`, 409 when the address is taken.
 * POST /orgs/:org/users/:id/activate — marks the user activated and sends `user.activated` in the
 * same transaction, which wakes the onboarding job waiting for it; 200 `{ id, woken }`.
 */
export function userRoutes(app: FastifyInstance, db: AppDatabase): void {
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  const created = Type.Object({ id: Type.Integer(), jobId: Type.Integer(), status: Type.String({ description: "GET this path for the onboarding job" }) });
  typed.post(
    "/orgs/:org/users",
    {
      schema: {
        summary: "Sign a user up (starts the onboarding job)",
        params: Type.Object({ org: Org }),
        body: Recipient,
        response: { 201: created, ...problemResponses(400, 409, 415) },
      },
    },
    async (request, reply) => {
      const { org } = request.params;
      const email = request.body.email.trim();
      const signed = await signUp(db, org, email, request.body.name?.trim() || email);
      if (!signed) {
        throw new ProblemError({ type: "urn:forge-sample:problem:conflict", title: "Conflict", status: 409, detail: `${org} already has a user ${email}` });
      }
      return reply.code(201).send({ id: signed.user.id, jobId: signed.jobId, status: `/orgs/${org}/jobs/${signed.jobId}` });
    },
  );

  typed.post(
    "/orgs/:org/users/:id/activate",
    {
      schema: {
        summary: "Activate a user (ends its onboarding's wait)",
        params: UserParams,
        response: { 200: Type.Object({ id: Type.Integer(), woken: Type.Integer() }), ...problemResponses(404) },
      },
    },
    async (request) => {
      const { org, id } = request.params;
      const activated = await activateUser(db, org, Number(id));
      if (!activated) throw notFound(`${org} has no user ${id}`);
      return activated;
    },
  );
}
