import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { enqueue } from "@forge/jobs";
import { IMPORT_JOB_TASK, importPayload } from "@forge/import-export";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { CONTACTS_IMPORTER } from "../contacts.js";
import { enqueueImportReport } from "../flows.js";
import type { AppDatabase } from "../db.js";
import { QUEUES, uploadsDir } from "../handlers.js";
import { invalid, notFound, PROBLEM_TYPES, ProblemError } from "../problems.js";
import { Accepted, ImportParams, OrgParams, problemResponses } from "../schemas.js";

function tooLarge(limit: number): ProblemError {
  return new ProblemError({
    type: PROBLEM_TYPES.tooLarge,
    title: "Payload Too Large",
    status: 413,
    detail: `The file is over the ${limit}-byte upload limit; split it or raise MAX_UPLOAD_BYTES.`,
  });
}

/** Where an import's rejected rows are written, next to its upload: `<uploads>/<org>/<id>.rejects.csv`. */
export const rejectsFileName = (importId: string): string => `${importId}.rejects.csv`;

/**
 * POST /orgs/:org/imports — a CSV upload (multipart field "file"). The file is stored under
 * data/uploads/<org>/<uuid>.csv, then the `imports` row and its job are written in ONE
 * transaction: if either fails, neither exists (no import without a job, no job without
 * its import), and the stored file is removed.
 *
 * POST /orgs/:org/imports/checks — "check file": the same upload run as a dry run (every row
 * validated, the writes rolled back), so the report shows what an import would do, constraint
 * errors included, before anything is written.
 *
 * GET /orgs/:org/imports/:importId/rejects.csv — the rejected rows, to fix and upload again.
 */
export function importRoutes(app: FastifyInstance, db: AppDatabase, config: { dataDir: string; maxUploadBytes: number }): void {
  const schema = (summary: string) => ({
    summary,
    consumes: ["multipart/form-data"],
    params: OrgParams,
    response: { 202: Accepted.import, ...problemResponses(400, 413, 415) },
  });
  const upload = (dryRun: boolean) => async (request: FastifyRequest<{ Params: { org: string } }>, reply: FastifyReply) => {
    const { org } = request.params;
    if (!request.isMultipart()) {
      throw new ProblemError({
        type: PROBLEM_TYPES.unsupported,
        title: "Unsupported Media Type",
        status: 415,
        detail: 'Upload the CSV as multipart/form-data, in a field named "file".',
        errors: [
          {
            field: "content-type",
            message: `${JSON.stringify(request.headers["content-type"] ?? "")} is not a content type this route accepts: send multipart/form-data`,
          },
        ],
      });
    }
    const part = await request.file({ limits: { fileSize: config.maxUploadBytes, files: 1 } });
    if (!part || part.fieldname !== "file") {
      throw invalid("No CSV file in the upload.", [{ field: "file", message: 'is required: a CSV file in a multipart field named "file"' }]);
    }

    const importId = randomUUID();
    const dir = path.join(uploadsDir(config), org);
    const name = `${importId}.csv`;
    const target = path.join(dir, name);
    const partial = `${target}.part`;
    await mkdir(dir, { recursive: true });
    try {
      await pipeline(part.file, createWriteStream(partial, { flags: "wx" }));
      if (part.file.truncated) throw tooLarge(config.maxUploadBytes);
      if ((await stat(partial)).size === 0) throw invalid("The CSV file is empty.", [{ field: "file", message: "is empty" }]);
      await rename(partial, target);
    } catch (error) {
      await rm(partial, { force: true });
      if ((error as { code?: string }).code === "FST_REQ_FILE_TOO_LARGE") throw tooLarge(config.maxUploadBytes);
      throw error;
    }

    try {
      const jobId = await db.transaction(async (sql, jobs) => {
        const payload = importPayload({ importer: CONTACTS_IMPORTER, file: name, dryRun, rejectsFile: rejectsFileName(importId) });
        const id = await enqueue(IMPORT_JOB_TASK, payload, { db: jobs, tenant: org, queue: QUEUES.imports, maxAttempts: 3 });
        await sql.query(`INSERT INTO ${db.imports} (id, org, file, job_id) VALUES ($1, $2, $3, $4)`, [importId, org, `${org}/${name}`, id]);
        // When an import ends, done or failed, its report goes to the org's admins (src/flows.ts); a check mails nobody.
        if (!dryRun) await enqueueImportReport(jobs, org, importId, id);
        return id;
      });
      return reply
        .code(202)
        .header("Location", `/orgs/${org}/jobs/${jobId}`)
        .send({ importId, jobId, dryRun, status: `/orgs/${org}/jobs/${jobId}`, rejects: `/orgs/${org}/imports/${importId}/rejects.csv` });
    } catch (error) {
      // Rolled back: no import row, no job. The file would be an orphan.
      await rm(target, { force: true });
      throw error;
    }
  };
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  typed.post("/orgs/:org/imports", { schema: schema('Upload a CSV of contacts to import (multipart/form-data, field "file")') }, upload(false));
  typed.post("/orgs/:org/imports/checks", { schema: schema("Check a CSV of contacts: the import run as a dry run, nothing written") }, upload(true));

  const rejectsSchema = { summary: "The rejected rows of an import, as a CSV to fix and upload again", params: ImportParams, response: problemResponses(404) };
  typed.get("/orgs/:org/imports/:importId/rejects.csv", { schema: rejectsSchema }, async (request, reply) => {
    const { org, importId } = request.params;
    const missing = notFound("No rejected rows for this import (yet).");
    // The row proves the import is this org's; the file exists once the import has read its header.
    const { rows } = await db.sql.query<{ id: string }>(`SELECT id FROM ${db.imports} WHERE id = $1 AND org = $2`, [importId, org]);
    if (rows.length === 0) throw missing;
    const file = path.join(uploadsDir(config), org, rejectsFileName(importId));
    try {
      await stat(file);
    } catch {
      throw missing;
    }
    return reply
      .header("content-type", "text/csv; charset=utf-8")
      .header("content-disposition", `attachment; filename="rejects-${importId}.csv"`)
      .send(createReadStream(file));
  });
}
