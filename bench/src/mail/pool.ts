// Campaign throughput of @forge/mail's handler to a loopback SMTP server: one connection per
// message (nodemailer's default) against a pooled transport (`pool: true`), the way a worker
// runs it (several jobs in flight). Medians over rounds, the variants rotating each round.
//   pnpm --filter @forge/bench exec tsx src/mail/pool.ts [--messages=500] [--rounds=3] [--concurrency=10]
import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createMailHandler, messageToPayload } from "@forge/mail";
import nodemailer from "nodemailer";

const arg = (name: string, fallback: number): number => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const MESSAGES = arg("messages", 500);
const ROUNDS = arg("rounds", 3);
const CONCURRENCY = arg("concurrency", 10);

interface Variant {
  name: string;
  transport: (port: number) => Record<string, unknown>;
}

const VARIANTS: Variant[] = [
  { name: "one connection per message", transport: (port) => ({ host: "127.0.0.1", port, ignoreTLS: true }) },
  { name: "pool, maxConnections 1", transport: (port) => ({ host: "127.0.0.1", port, ignoreTLS: true, pool: true, maxConnections: 1 }) },
  { name: "pool, maxConnections 5 (default)", transport: (port) => ({ host: "127.0.0.1", port, ignoreTLS: true, pool: true, maxConnections: 5 }) },
  { name: "pool, maxConnections 10", transport: (port) => ({ host: "127.0.0.1", port, ignoreTLS: true, pool: true, maxConnections: 10 }) },
  // rateLimit caps the pool below what the server takes: the provider's allowance, not the link's.
  {
    name: "pool, maxConnections 5, rateLimit 25/s",
    transport: (port) => ({ host: "127.0.0.1", port, ignoreTLS: true, pool: true, maxConnections: 5, rateDelta: 1000, rateLimit: 25 }),
  },
];

const payload = messageToPayload({
  from: "Shop <news@shop.example.org>",
  to: "alice@example.com",
  subject: "December news",
  text: "Hello,\n".concat("This is the campaign body. ".repeat(60)),
  headers: { "X-Campaign": "acme/dec" },
});

async function startSink(): Promise<{ port: number; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(path.dirname(fileURLToPath(import.meta.url)), "smtp-sink.ts")], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const [chunk] = (await once(child.stdout!, "data")) as [Buffer];
  const port = Number(/port (\d+)/.exec(chunk.toString())![1]);
  return {
    port,
    async stop() {
      child.stdin!.end();
      await once(child, "exit");
    },
  };
}

/** Messages per second for one variant: MESSAGES sends, CONCURRENCY in flight, as a worker would. */
async function run(variant: Variant, port: number): Promise<number> {
  const transporter = nodemailer.createTransport(variant.transport(port));
  const send = createMailHandler({ transport: transporter });
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < MESSAGES) {
        next += 1;
        await send(payload);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  transporter.close();
  return MESSAGES / seconds;
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const sink = await startSink();
const results = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
for (let round = 0; round < ROUNDS; round++) {
  const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!);
  for (const variant of order) results.get(variant.name)!.push(await run(variant, sink.port));
}
await sink.stop();

const base = median(results.get(VARIANTS[0]!.name)!);
console.log(
  `@forge/mail campaign throughput: ${MESSAGES} messages, ${CONCURRENCY} in flight, ${ROUNDS} rounds, loopback SMTP (smtp-server), Node ${process.version}`,
);
console.log("| transport | messages/s (median) | min–max | vs one connection per message |");
console.log("|---|---:|---:|---:|");
for (const variant of VARIANTS) {
  const values = results.get(variant.name)!;
  const m = median(values);
  console.log(`| ${variant.name} | ${m.toFixed(0)} | ${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)} | ${(m / base).toFixed(2)}x |`);
}
