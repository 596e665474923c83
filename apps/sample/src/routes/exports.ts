import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import { enqueue } from "@forge/jobs";
import { EXPORT_JOB_TASK, exportPayload } from "@forge/import-export";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { CONTACTS_EXPORTER } from "../contacts.js";
import type { AppDatabase } from "../db.js";
import { exportsDir, QUEUES } from "../handlers.js";
import { notFound } from "../problems.js";
import { Accepted, ExportFileParams, OrgParams, problemResponses } from "../schemas.js";

/**
 * POST /orgs/:org/exports — queue a CSV export of the org's contacts (202 with the job and
 * the file it will write); GET /orgs/:org/exports/:file — download it once the job is done.
 */
export function exportRoutes(app: FastifyInstance, db: AppDatabase, config: { dataDir: string }): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const queue = { summary: "Queue a CSV export of the org's contacts", params: OrgParams, response: { 202: Accepted.export, ...problemResponses(400) } };
  api.post("/orgs/:org/exports", { schema: queue }, async (request, reply) => {
    const { org } = request.params;
    const file = `contacts-${randomUUID()}.csv`;
    const jobId = await enqueue(EXPORT_JOB_TASK, exportPayload({ exporter: CONTACTS_EXPORTER, file }), {
      db: db.jobs,
      tenant: org,
      queue: QUEUES.exports,
      maxAttempts: 3,
    });
    return reply.code(202).send({ jobId, file, status: `/orgs/${org}/jobs/${jobId}`, download: `/orgs/${org}/exports/${file}` });
  });

  const download = { summary: "Download an export (text/csv) once its job is done", params: ExportFileParams, response: problemResponses(400, 404) };
  api.get("/orgs/:org/exports/:file", { schema: download }, async (request, reply) => {
    const { org, file } = request.params;
    const target = path.join(exportsDir(config), org, file);
    const found = await stat(target).catch(() => null);
    if (!found?.isFile()) throw notFound("No such export here (yet): check the export job's status.");
    return reply.type("text/csv; charset=utf-8").header("Content-Disposition", `attachment; filename="${file}"`).send(createReadStream(target));
  });
}
