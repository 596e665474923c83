import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import { enqueue } from "@forge/jobs";
import { EXPORT_JOB_TASK, exportPayload } from "@forge/import-export";
import type { FastifyInstance } from "fastify";
import { CONTACTS_EXPORTER } from "../contacts.js";
import type { AppDatabase } from "../db.js";
import { exportsDir, QUEUES } from "../handlers.js";
import { notFound } from "../problems.js";
import { checkPath } from "./params.js";

const EXPORT_FILE = /^contacts-[0-9a-f-]{36}\.csv$/;

/**
 * POST /orgs/:org/exports — queue a CSV export of the org's contacts (202 with the job and
 * the file it will write); GET /orgs/:org/exports/:file — download it once the job is done.
 */
export function exportRoutes(app: FastifyInstance, db: AppDatabase, config: { dataDir: string }): void {
  app.post<{ Params: { org: string } }>("/orgs/:org/exports", async (request, reply) => {
    const { org } = request.params;
    checkPath(request.params).check("The export cannot be queued as given.");
    const file = `contacts-${randomUUID()}.csv`;
    const jobId = await enqueue(EXPORT_JOB_TASK, exportPayload({ exporter: CONTACTS_EXPORTER, file }), {
      db: db.jobs,
      tenant: org,
      queue: QUEUES.exports,
      maxAttempts: 3,
    });
    return reply.code(202).send({ jobId, file, status: `/orgs/${org}/jobs/${jobId}`, download: `/orgs/${org}/exports/${file}` });
  });

  app.get<{ Params: { org: string; file: string } }>("/orgs/:org/exports/:file", async (request, reply) => {
    const { org, file } = request.params;
    const problems = checkPath(request.params);
    if (!EXPORT_FILE.test(file)) problems.add("file", "is not an export file name");
    problems.check("No such export.");
    const target = path.join(exportsDir(config), org, file);
    const found = await stat(target).catch(() => null);
    if (!found?.isFile()) throw notFound("No such export here (yet): check the export job's status.");
    return reply.type("text/csv; charset=utf-8").header("Content-Disposition", `attachment; filename="${file}"`).send(createReadStream(target));
  });
}
