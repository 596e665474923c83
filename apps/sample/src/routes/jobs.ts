import { getJob } from "@forge/jobs";
import type { FastifyInstance } from "fastify";
import type { AppDatabase } from "../db.js";
import { notFound } from "../problems.js";
import { checkPath } from "./params.js";

/**
 * GET /orgs/:org/jobs/:id — a job's state, scoped to the org: another org's job is "not
 * found", with the very same answer as a job that does not exist (no way to probe ids).
 */
export function jobRoutes(app: FastifyInstance, db: AppDatabase): void {
  app.get<{ Params: { org: string; id: string } }>("/orgs/:org/jobs/:id", async (request) => {
    const { org, id } = request.params;
    const problems = checkPath(request.params);
    if (!/^[1-9]\d{0,15}$/.test(id)) problems.add("id", "must be a job id (a positive integer)");
    problems.check("No job can have this address.");
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
      lastError: job.lastError,
      createdAt: job.createdAt,
      updatedAt: job.updatedAt,
    };
  });
}
