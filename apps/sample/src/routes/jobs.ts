import { getJob } from "@forge/jobs";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import type { AppDatabase } from "../db.js";
import { notFound, withoutServerPaths } from "../problems.js";
import { JobParams, JobView, problemResponses } from "../schemas.js";

/**
 * GET /orgs/:org/jobs/:id — a job's state, scoped to the org: another org's job is "not
 * found", with the very same answer as a job that does not exist (no way to probe ids).
 */
export function jobRoutes(app: FastifyInstance, db: AppDatabase): void {
  const schema = { summary: "A job's state", params: JobParams, response: { 200: JobView, ...problemResponses(400, 404) } };
  app.withTypeProvider<TypeBoxTypeProvider>().get("/orgs/:org/jobs/:id", { schema }, async (request) => {
    const { org, id } = request.params;
    const job = await getJob(Number(id), { db: db.jobs, tenant: org });
    if (!job) throw notFound("No such job in this organization.");
    return {
      id: job.id,
      task: job.task,
      queue: job.queue,
      status: job.status,
      attempts: job.attempts,
      maxAttempts: job.maxAttempts,
      progress: job.progress,
      result: job.result,
      // What went wrong, not where: the first line, without the server's paths (the stack is
      // for operators: the dashboard and `forge-jobs show`).
      lastError: job.lastError === null ? null : withoutServerPaths(job.lastError.split("\n")[0]!),
      createdAt: job.createdAt,
      updatedAt: job.updatedAt,
    };
  });
}
