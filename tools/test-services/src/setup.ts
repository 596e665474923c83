// Vitest global setup for `pnpm test`: which database servers answer. Outside CI, a backend
// that does not answer is left out (FORGE_TEST_BACKENDS) with one line saying so, and every
// test the others can run still runs — SQLite always. In CI (CI=true) nothing is left out:
// .ci/run starts every service, and a server that does not answer fails the run loudly.
import net from "node:net";
import { inCI } from "./optional.js";

interface Service {
  name: "postgres" | "mysql";
  label: string;
  url: string;
  start: string;
}

function services(env: NodeJS.ProcessEnv): Service[] {
  return [
    {
      name: "postgres",
      label: "PostgreSQL",
      url: env.FORGE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
      start: "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    },
    {
      name: "mysql",
      label: "MariaDB",
      url: env.FORGE_TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test",
      start: "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
    },
  ];
}

/** Whether something accepts TCP connections at the URL's host and port within a second. */
export function answers(url: string, defaultPort: number): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname || "127.0.0.1", port: Number(port) || defaultPort });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/** The backends to run, and a line for each one left out; CI and an explicit FORGE_TEST_BACKENDS are obeyed as they are. */
export async function chooseBackends(env: NodeJS.ProcessEnv): Promise<{ backends: string | undefined; notices: string[] }> {
  if (inCI(env) || env.FORGE_TEST_BACKENDS) return { backends: env.FORGE_TEST_BACKENDS, notices: [] };
  const down: Service[] = [];
  for (const service of services(env)) if (!(await answers(service.url, service.name === "postgres" ? 5432 : 3306))) down.push(service);
  if (down.length === 0) return { backends: undefined, notices: [] };
  const kept = ["postgres", "sqlite", "mysql"].filter((name) => !down.some((s) => s.name === name));
  const notices = down.map(
    (s) =>
      `forge tests: ${s.label} is not answering at ${new URL(s.url).host}; its tests are skipped (start it: ${s.start}; ` +
      `or choose backends with FORGE_TEST_BACKENDS=${kept.join(",")})`,
  );
  return { backends: kept.join(","), notices };
}

export default async function setup(): Promise<void> {
  const { backends, notices } = await chooseBackends(process.env);
  for (const line of notices) console.warn(line);
  // Inherited by the test workers, which start after this.
  if (backends !== undefined) process.env.FORGE_TEST_BACKENDS = backends;
}
