import swagger from "@fastify/swagger";
import type { FastifyInstance } from "fastify";

/**
 * The OpenAPI 3.1 description of every route, built by @fastify/swagger from the same TypeBox
 * schemas that validate the requests (src/schemas.ts), served at GET /openapi.json. Registered
 * before the routes: it collects them as they are added.
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Forge sample",
        version: "1.0.0",
        description:
          "Routes that enqueue background jobs (@forge/jobs) and answer at once. Every error is Problem Details (RFC 9457, application/problem+json).",
      },
    },
  });
  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());
}
