// `pnpm demo`: the whole app on one machine, no server to install. A fresh data folder and
// database per run; a local SMTP catcher unless SMTP_URL points at a real relay; the worker
// in its own process, as in production. Exits 0 when everything happened as it should.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { listLimits, statusCounts, type QueueStatus } from "@forge/jobs";
import type { ImportReport } from "@forge/import-export";
import { buildApp } from "./app.js";
import { APP_DIR, loadConfig, redactUrl } from "./config.js";
import { countContacts } from "./contacts.js";
import { openDatabase } from "./db.js";
import { migrateApp } from "./migrate.js";
import { exportsDir, QUEUES } from "./handlers.js";
import { startSmtpCatcher, type SmtpCatcher } from "./smtp-catcher.js";

const ORG = "acme";
const CSV_FILE = path.join(APP_DIR, "demo", "contacts.csv");
const RECIPIENTS = [
  { email: "ada@example.org", name: "Ada Lovelace" },
  { email: "alan@example.org", name: "Alan Turing" },
  { email: "grace@example.org", name: "Grace Hopper" },
  { email: "edsger@example.org" },
  { email: "barbara@example.org", name: "Barbara Liskov" },
];
const keep = process.env.KEEP_DEMO_DATA === "1";
const problems: string[] = [];
const say = (line = "") => console.log(line);
const ms = (since: number) => `${Date.now() - since} ms`;

interface JobView {
  id: number;
  status: string;
  attempts: number;
  result: unknown;
  lastError: string | null;
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "forge-sample-demo-"));
  const external = process.env.DATABASE_URL;
  const onPostgres = external !== undefined && /^postgres(ql)?:/i.test(external);
  const schema = onPostgres ? `demo_${randomBytes(4).toString("hex")}` : process.env.DATABASE_SCHEMA;
  let catcher: SmtpCatcher | undefined;
  let worker: ChildProcess | undefined;
  const cleanups: (() => Promise<unknown>)[] = [];

  try {
    catcher = process.env.SMTP_URL ? undefined : await startSmtpCatcher();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATA_DIR: dataDir,
      DATABASE_URL: external ?? `sqlite:${path.join(dataDir, "sample.db")}`,
      ...(schema ? { DATABASE_SCHEMA: schema } : {}),
      SMTP_URL: process.env.SMTP_URL ?? catcher!.url,
      ADMIN_TOKEN: randomBytes(12).toString("hex"),
    };
    const config = loadConfig(env);

    say("Forge jobs — demo");
    say(`  data      ${dataDir}${keep ? " (kept: KEEP_DEMO_DATA=1)" : " (removed at the end)"}`);
    say(`  database  ${redactUrl(config.databaseUrl)}${schema ? ` (fresh schema ${schema})` : ""}`);
    say(`  smtp      ${catcher ? `local catcher ${catcher.url}` : `relay ${redactUrl(config.smtpUrl!)}`}`);

    const db = openDatabase(config);
    cleanups.push(async () => {
      if (onPostgres && schema && !keep) await db.sql.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await db.close();
    });
    await migrateApp(db);

    const { app } = await buildApp(config, { db, logger: false });
    await app.listen({ port: 0, host: "127.0.0.1" });
    cleanups.unshift(() => app.close());
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    say(`  app       ${base}`);

    worker = spawn(process.execPath, ["--import", "tsx", path.join(APP_DIR, "src", "worker.ts")], { cwd: APP_DIR, env, stdio: ["ignore", "pipe", "pipe"] });
    const workerLog: string[] = [];
    const exited = new Promise<number | null>((resolve) => worker!.once("exit", (code) => resolve(code)));
    for (const stream of [worker.stdout!, worker.stderr!]) {
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => workerLog.push(...chunk.split("\n").filter(Boolean)));
    }
    say(`  worker    child process ${worker.pid} (src/worker.ts), queues ${Object.values(QUEUES).join(", ")}`);
    say();

    const post = async (route: string, body: unknown) => {
      const init: RequestInit =
        body instanceof FormData ? { method: "POST", body } : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
      const response = await fetch(`${base}${route}`, init);
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const job = async (id: unknown) => (await (await fetch(`${base}/orgs/${ORG}/jobs/${String(id)}`)).json()) as JobView;

    // 1. The campaign, through the real route.
    const route = `/orgs/${ORG}/campaigns/welcome/send`;
    const campaign = { subject: "Welcome to Acme", text: "Hello,\nthanks for joining us.\n— Acme", recipients: RECIPIENTS };
    let t = Date.now();
    const sent = await post(route, campaign);
    const jobIds = sent.body.jobIds as number[];
    say(`1. Campaign "welcome" to ${RECIPIENTS.length} recipients: POST ${route}`);
    say(`   ${sent.status} in ${ms(t)} (SMTP happens in the worker): jobs ${jobIds.join(", ")}`);
    if (sent.status !== 202) problems.push(`the campaign answered ${sent.status}`);
    const again = await post(route, campaign);
    const same = JSON.stringify(again.body.jobIds) === JSON.stringify(jobIds);
    say(`   clicked twice: ${again.status}, ${same ? "the same jobs — nothing is sent twice" : "DIFFERENT jobs"}`);
    if (!same) problems.push("a double click enqueued new jobs");
    const invalid = await post(route, { subject: "", text: "x", recipients: [{ email: "bob@" }] });
    const errors = (invalid.body.errors as { field: string; message: string }[] | undefined) ?? [];
    say(`   an invalid campaign: ${invalid.status} problem+json — ${errors.map((e) => `${e.field} ${e.message}`).join("; ")}`);

    // 2. The CSV import, through the real upload route.
    const csv = await readFile(CSV_FILE);
    const form = new FormData();
    form.append("file", new Blob([csv], { type: "text/csv" }), "contacts.csv");
    t = Date.now();
    const uploaded = await post(`/orgs/${ORG}/imports`, form);
    say();
    say(`2. Import ${path.relative(APP_DIR, CSV_FILE)} (${csv.toString("utf8").trim().split("\n").length - 1} rows): POST /orgs/${ORG}/imports`);
    say(`   ${uploaded.status} in ${ms(t)}: import ${String(uploaded.body.importId)}, job ${String(uploaded.body.jobId)} (row and job in one transaction)`);
    if (uploaded.status !== 202) problems.push(`the upload answered ${uploaded.status}`);

    // 3. Wait for the worker.
    say();
    t = Date.now();
    let counts = await drained(db.jobs);
    say(`3. Queue drained (READY=0, RUNNING=0) after ${ms(t)}`);

    // 4. An export of what was imported.
    const exported = await post(`/orgs/${ORG}/exports`, {});
    counts = await drained(db.jobs);
    const exportJob = await job(exported.body.jobId);
    const exportFile = path.join(exportsDir(config), ORG, String(exported.body.file));
    const exportedLines = exportJob.status === "done" ? (await readFile(exportFile, "utf8")).trim().split("\n") : [];
    say(`4. Export of the contacts: job ${exportJob.id} ${exportJob.status}, ${exportedLines.length - 1} rows in ${path.relative(dataDir, exportFile)}`);
    if (exportJob.status !== "done") problems.push(`the export job is ${exportJob.status}: ${exportJob.lastError ?? ""}`);

    // What happened.
    say();
    say("Results");
    say(table(counts));
    const total = (key: "done" | "failed" | "pending") => counts.reduce((n, q) => n + q.counts[key], 0);
    say(`  jobs: ${total("done")} done, ${total("failed")} failed, ${total("pending")} pending`);
    if (total("failed") > 0) problems.push(`${total("failed")} job(s) failed`);

    const mailJobs = await Promise.all(jobIds.map(job));
    const delivered = mailJobs.filter((j) => j.status === "done").length;
    if (catcher) {
      say(`  mails delivered (counted by the SMTP catcher): ${catcher.messages.length} of ${RECIPIENTS.length}`);
      for (const m of catcher.messages) say(`    → ${m.to.join(", ")}  "${m.subject}"`);
      if (catcher.messages.length !== RECIPIENTS.length) problems.push(`${catcher.messages.length} mails delivered, ${RECIPIENTS.length} expected`);
    } else {
      say(`  mails accepted by the relay: ${delivered} of ${RECIPIENTS.length} jobs done`);
    }
    for (const j of mailJobs.filter((m) => m.status !== "done")) say(`    job ${j.id}: ${j.status} after ${j.attempts} attempt(s): ${j.lastError ?? ""}`);

    const importJob = await job(uploaded.body.jobId);
    const report = importJob.result as ImportReport | null;
    if (importJob.status === "done" && report) {
      say(`  import: ${report.read} rows read, ${report.imported} imported, ${report.rejected} rejected`);
      for (const e of report.errors) say(`    line ${String(e.line).padEnd(3)} ${(e.field || "(row)").padEnd(6)} ${e.message}`);
    } else {
      say(`  import: job ${importJob.status}: ${importJob.lastError ?? ""}`);
      problems.push(`the import job is ${importJob.status}`);
    }
    say(`  contacts of ${ORG} in the database: ${await countContacts(db, ORG)}`);
    for (const limit of await listLimits({ db: db.jobs })) {
      const rate = limit.rate ? `${limit.rate.limit} per ${limit.rate.perSeconds} s` : "no rate";
      say(`  limit ${limit.key}: ${limit.concurrency ?? "no"} at once, ${rate} (declared by the worker at start-up; see forge-jobs limits list)`);
    }

    const dashboard = await fetch(`${base}/admin/jobs`, { headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` } });
    say(
      `  dashboard: GET /admin/jobs with the admin token → ${dashboard.status} (${(await dashboard.text()).length} bytes of HTML); without → ${(await fetch(`${base}/admin/jobs`)).status}`,
    );

    // Graceful stop: SIGTERM lets running jobs finish; the worker exits by itself.
    say();
    worker.kill("SIGTERM");
    const code = await Promise.race([exited, new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 15_000))]);
    say(`Worker stopped on SIGTERM (exit ${String(code)}).`);
    if (code !== 0) {
      problems.push(`the worker exited with ${String(code)}`);
      for (const line of workerLog) say(`  worker | ${line}`);
    }
    worker = undefined;
  } finally {
    worker?.kill("SIGKILL");
    for (const cleanup of cleanups) await cleanup().catch((error: unknown) => problems.push(`cleanup: ${String(error)}`));
    await catcher?.close();
    if (!keep) await rm(dataDir, { recursive: true, force: true });
  }
}

/** Polls statusCounts until nothing is ready or running (jobs waiting out a retry delay do not count). */
async function drained(db: Parameters<typeof statusCounts>[0] extends infer O ? (O extends { db?: infer D } ? D : never) : never): Promise<QueueStatus[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const counts = await statusCounts({ db });
    if (counts.every((q) => q.ready === 0 && q.counts.running === 0)) return counts;
    if (Date.now() > deadline) throw new Error(`the queue did not drain in 60 s: ${JSON.stringify(counts)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function table(counts: QueueStatus[]): string {
  const rows = [
    ["queue", "PENDING", "RUNNING", "FAILED", "DONE", "READY"],
    ...counts.map((q) => [q.queue, ...[q.counts.pending, q.counts.running, q.counts.failed, q.counts.done, q.ready].map(String)]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => `  ${r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ")}`).join("\n");
}

main().then(
  () => {
    if (problems.length > 0) {
      console.error(`\nDemo FAILED:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
      process.exit(1);
    }
    say("Demo OK.");
  },
  (error: unknown) => {
    console.error("\nDemo FAILED:", error);
    process.exit(1);
  },
);
