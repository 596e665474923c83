// The sample's onboarding sequence (src/onboarding.ts), end to end: the signup route, a worker
// running the real handlers, mail delivered to a real SMTP server on loopback, a real database.
// A 1 s pause instead of 3 days; the activation timeout 1 s on the timeout path.
import { getJob, getJobSteps, runWorker } from "@forge/jobs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";
import { createHandlers, QUEUES } from "../src/handlers.js";
import { backendNames, createEnv, startApp, startSmtp, waitFor, type Env } from "./support.js";

const names = await backendNames();

describe("onboarding's configuration", () => {
  it("pauses 3 days and waits 7 by default; ONBOARDING_* set both, within the queue's 366 days", () => {
    expect(loadConfig({})).toMatchObject({ onboardingSleepSeconds: 259_200, onboardingActivationTimeoutSeconds: 604_800 });
    expect(loadConfig({ ONBOARDING_SLEEP_SECONDS: "0", ONBOARDING_ACTIVATION_TIMEOUT_SECONDS: "30" })).toMatchObject({
      onboardingSleepSeconds: 0,
      onboardingActivationTimeoutSeconds: 30,
    });
    expect(() => loadConfig({ ONBOARDING_ACTIVATION_TIMEOUT_SECONDS: "0" })).toThrow(ConfigError);
    expect(() => loadConfig({ ONBOARDING_SLEEP_SECONDS: String(367 * 86_400) })).toThrow(/ONBOARDING_SLEEP_SECONDS must be an integer from 0 to 31622400/);
  });
});

describe.each(names)("onboarding: welcome, pause, wait for activation, thanks or reminder (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let stopWorker: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    smtp = await startSmtp();
    env = await createEnv(name);
    server = await startApp(env);
  });
  afterEach(async () => {
    await stopWorker?.();
    stopWorker = undefined;
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
    await smtp?.close();
  });

  /** A worker on the app's queues with the onboarding's durations given; a small sweep ends timed-out waits quickly. */
  function startWorker(activationTimeoutSeconds: number, sleepSeconds = 1) {
    const stop = new AbortController();
    const handlers = createHandlers(
      { ...env.config, smtpUrl: smtp.url, onboardingSleepSeconds: sleepSeconds, onboardingActivationTimeoutSeconds: activationTimeoutSeconds },
      env.db,
    );
    const running = runWorker(handlers, { db: env.db.jobs, queue: Object.values(QUEUES), pollInterval: 0.1, sweepInterval: 0.2, signal: stop.signal });
    stopWorker = async () => {
      stop.abort();
      await running;
    };
  }
  const post = (route: string, body?: unknown) =>
    fetch(`${server.url}${route}`, {
      method: "POST",
      ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    });
  const mailsTo = (address: string) => smtp.messages.filter((m) => m.to.includes(address)).map((m) => m.subject);
  const signUp = async (org: string, email: string) => {
    const response = await post(`/orgs/${org}/users`, { email, name: "Ada" });
    expect(response.status).toBe(201);
    return (await response.json()) as { id: number; jobId: number };
  };
  const steps = async (jobId: number, org: string) => (await getJobSteps(jobId, { db: env.db.jobs, tenant: org }))!;

  it("activated during the wait: the welcome mail, then the thanks mail, no reminder", async () => {
    startWorker(60);
    const { id, jobId } = await signUp("acme", "ada@example.org");
    await waitFor("the welcome mail", async () => mailsTo("ada@example.org").includes("Welcome aboard"));
    // After the 1 s pause the job waits for the activation, holding no worker slot.
    await waitFor("the wait for user.activated", async () => (await steps(jobId, "acme")).waitingFor?.kind === "event");
    expect((await steps(jobId, "acme")).waitingFor).toMatchObject({ kind: "event", step: "activation", event: "user.activated", key: String(id) });
    expect(await getJob(jobId, { db: env.db.jobs })).toMatchObject({ status: "waiting", tenant: "acme" });

    const activated = await post(`/orgs/acme/users/${id}/activate`);
    expect(activated.status).toBe(200);
    expect(await activated.json()).toEqual({ id, woken: 1 });

    await waitFor("the thanks mail", async () => mailsTo("ada@example.org").includes("Thanks for activating"));
    await waitFor("the job done", async () => (await getJob(jobId, { db: env.db.jobs }))?.status === "done");
    expect((await getJob(jobId, { db: env.db.jobs }))!.result).toEqual({ activated: true });
    expect(mailsTo("ada@example.org")).toEqual(["Welcome aboard", "Thanks for activating"]);
    expect((await steps(jobId, "acme")).steps.map((s) => [s.name, s.kind])).toEqual([
      ["welcome", "step"],
      ["pause", "sleep"],
      ["activation", "event"],
      ["thanks", "step"],
    ]);
    // A second activation sends nothing more; an unknown user is a 404.
    expect(await (await post(`/orgs/acme/users/${id}/activate`)).json()).toEqual({ id, woken: 0 });
    expect((await post(`/orgs/acme/users/999999/activate`)).status).toBe(404);
  });

  it("activated during the pause, before the job waits: no job woken then, and the wait gets the event when it begins", async () => {
    // A longer pause here, so that the activation surely lands in it on a busy machine.
    startWorker(60, 3);
    const { id, jobId } = await signUp("umbrella", "lin@example.org");
    await waitFor("the pause", async () => (await steps(jobId, "umbrella")).waitingFor?.kind === "sleep");
    expect(await (await post(`/orgs/umbrella/users/${id}/activate`)).json()).toEqual({ id, woken: 0 });
    await waitFor("the thanks mail", async () => mailsTo("lin@example.org").includes("Thanks for activating"));
    await waitFor("the job done", async () => (await getJob(jobId, { db: env.db.jobs }))?.status === "done");
    expect((await getJob(jobId, { db: env.db.jobs }))!.result).toEqual({ activated: true });
    expect(mailsTo("lin@example.org")).toEqual(["Welcome aboard", "Thanks for activating"]);
  });

  it("no activation: the welcome mail, then the reminder once the wait timed out", async () => {
    startWorker(1);
    const { jobId } = await signUp("globex", "grace@example.org");
    await waitFor("the welcome mail", async () => mailsTo("grace@example.org").includes("Welcome aboard"));
    await waitFor("the reminder mail", async () => mailsTo("grace@example.org").includes("Your account is waiting"));
    await waitFor("the job done", async () => (await getJob(jobId, { db: env.db.jobs }))?.status === "done");
    expect((await getJob(jobId, { db: env.db.jobs }))!.result).toEqual({ activated: false });
    expect(mailsTo("grace@example.org")).toEqual(["Welcome aboard", "Your account is waiting"]);
    expect((await steps(jobId, "globex")).steps.map((s) => s.name)).toEqual(["welcome", "pause", "activation", "reminder"]);
  });

  it("a second signup of the same address is a 409 and starts no second onboarding", async () => {
    await signUp("initech", "bob@example.org");
    const before = await env.count();
    const again = await post("/orgs/initech/users", { email: "bob@example.org" });
    expect(again.status).toBe(409);
    expect(await env.count()).toBe(before);
  });
});
