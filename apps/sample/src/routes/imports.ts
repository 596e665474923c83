import { randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { enqueue } from "@forge/jobs";
import { IMPORT_JOB_TASK, importPayload } from "@forge/import-export";
import type { FastifyInstance } from "fastify";
import { CONTACTS_IMPORTER } from "../contacts.js";
import type { AppDatabase } from "../db.js";
import { QUEUES, uploadsDir } from "../handlers.js";
import { invalid, PROBLEM_TYPES, ProblemError } from "../problems.js";
import { checkPath } from "./params.js";

function tooLarge(limit: number): ProblemError {
  return new ProblemError({
    type: PROBLEM_TYPES.tooLarge,
    title: "Payload Too Large",
    status: 413,
    detail: `The file is over the ${limit}-byte upload limit; split it or raise MAX_UPLOAD_BYTES.`,
  });
}

/**
 * POST /orgs/:org/imports — a CSV upload (multipart field "file"). The file is stored under
 * data/uploads/<org>/<uuid>.csv, then the `imports` row and its job are written in ONE
 * transaction: if either fails, neither exists (no import without a job, no job without
 * its import), and the stored file is removed.
 */
export function importRoutes(app: FastifyInstance, db: AppDatabase, config: { dataDir: string; maxUploadBytes: number }): void {
  app.post<{ Params: { org: string } }>("/orgs/:org/imports", async (request, reply) => {
    const { org } = request.params;
    checkPath(request.params).check("The upload cannot be accepted as given.");
    if (!request.isMultipart()) {
      throw invalid("Upload the CSV as multipart/form-data.", [{ field: "file", message: 'send the CSV as multipart/form-data in a field named "file"' }]);
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
        const id = await enqueue(IMPORT_JOB_TASK, importPayload({ importer: CONTACTS_IMPORTER, file: name }), {
          db: jobs,
          tenant: org,
          queue: QUEUES.imports,
          maxAttempts: 3,
        });
        await sql.query(`INSERT INTO ${db.imports} (id, org, file, job_id) VALUES ($1, $2, $3, $4)`, [importId, org, `${org}/${name}`, id]);
        return id;
      });
      return reply
        .code(202)
        .header("Location", `/orgs/${org}/jobs/${jobId}`)
        .send({ importId, jobId, status: `/orgs/${org}/jobs/${jobId}` });
    } catch (error) {
      // Rolled back: no import row, no job. The file would be an orphan.
      await rm(target, { force: true });
      throw error;
    }
  });
}
