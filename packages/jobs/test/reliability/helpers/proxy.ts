import { connect as tcpConnect, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy on 127.0.0.1 in front of a database, to cut the network silently. `cut()` stops
 * every byte in both directions without closing anything — a partition, as a dropped link or
 * a firewall that drops packets looks to both ends: nobody is told, queries just never get an
 * answer. New connections are accepted and then left unanswered too. `heal("reset")` ends the
 * partition the way a long one usually ends (the connections are gone: both ends see them
 * reset); `heal("resume")` the way a short blip does (TCP delivers what was held back).
 */
export interface Proxy {
  port: number;
  /** Connections open through the proxy right now. */
  readonly connections: number;
  cut(): void;
  heal(how: "reset" | "resume"): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket | null;
}

export async function startProxy(target: { host: string; port: number }): Promise<Proxy> {
  let cut = false;
  const pairs = new Set<Pair>();

  const link = (pair: Pair) => {
    const upstream = tcpConnect(target.port, target.host);
    pair.upstream = upstream;
    upstream.on("error", () => pair.client.destroy());
    upstream.on("close", () => pair.client.destroy());
    pair.client.pipe(upstream);
    upstream.pipe(pair.client);
  };

  const server: Server = createServer((client) => {
    const pair: Pair = { client, upstream: null };
    pairs.add(pair);
    client.on("error", () => undefined);
    client.on("close", () => {
      pair.upstream?.destroy();
      pairs.delete(pair);
    });
    if (cut)
      client.pause(); // accepted, then silence
    else link(pair);
  });
  const port = await listenOnLoopback(server);

  return {
    port,
    get connections() {
      return pairs.size;
    },
    cut() {
      cut = true;
      for (const { client, upstream } of pairs) {
        // Unpipe and pause: bytes stay in the socket buffers, undelivered, as on a dead link.
        client.unpipe();
        upstream?.unpipe();
        client.pause();
        upstream?.pause();
      }
    },
    heal(how) {
      cut = false;
      for (const pair of [...pairs]) {
        if (how === "reset") {
          pair.client.resetAndDestroy();
          pair.upstream?.destroy();
          pairs.delete(pair);
        } else if (pair.upstream) {
          pair.client.pipe(pair.upstream);
          pair.upstream.pipe(pair.client);
          pair.client.resume();
          pair.upstream.resume();
        } else {
          pair.client.resume();
          link(pair);
        }
      }
    },
    async close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream?.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Listens on a free port of 127.0.0.1; resolves with the port. */
export async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (typeof address !== "object" || !address) throw new Error("proxy: no address");
  return address.port;
}

/** The same database URL, through the proxy. */
export function viaProxy(url: string, proxy: Pick<Proxy, "port">): string {
  const parsed = new URL(url);
  parsed.hostname = "127.0.0.1";
  parsed.port = String(proxy.port);
  return parsed.toString();
}

export function hostAndPort(url: string, defaultPort: number): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: parsed.port ? Number(parsed.port) : defaultPort };
}
