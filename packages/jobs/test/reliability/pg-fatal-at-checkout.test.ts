// Seen once in CI during `pg_ctl restart -m fast`: a worker process died of an unhandled
// 'error' event (57P01, "terminating connection due to administrator command") on a pg client.
// A new connection's last startup bytes (ReadyForQuery) and the server's FATAL arrived in one
// TCP chunk. pg parses both in one go: the pool hands the client out while parsing the first,
// before an awaiting caller can put its 'error' listener on, and the FATAL that follows is
// emitted on a client with no listener. This proxy sends exactly that chunk, deterministically,
// in front of the real server: the queue's calls must fail with the error, not crash.
import { createServer, connect as tcpConnect, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, reclaim, statusCounts, type JobsDatabase } from "../../src/index.js";
import { backends, type TestDatabase } from "../helpers/backends.js";
import { hostAndPort, listenOnLoopback, viaProxy } from "./helpers/proxy.js";

/** An ErrorResponse as the server sends it on shutdown. */
function fatal57P01(): Buffer {
  const fields = Buffer.concat([
    ...[
      ["S", "FATAL"],
      ["V", "FATAL"],
      ["C", "57P01"],
      ["M", "terminating connection due to administrator command"],
    ].map(([code, text]) => Buffer.concat([Buffer.from(code!), Buffer.from(text!), Buffer.from([0])])),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write("E", 0);
  head.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

/** The end of the first ReadyForQuery ('Z') message in `data`, or -1. */
function afterReadyForQuery(data: Buffer): number {
  let at = 0;
  while (at + 5 <= data.length) {
    const length = data.readInt32BE(at + 1);
    if (at + 1 + length > data.length) return -1;
    if (data[at] === 0x5a) return at + 1 + length;
    at += 1 + length;
  }
  return -1;
}

/** Relays the startup; the chunk holding ReadyForQuery goes out with a FATAL after it, then the connection ends. */
async function startFatalProxy(target: { host: string; port: number }): Promise<{ port: number; fatals: number; close(): Promise<void> }> {
  const state = { fatals: 0 };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    const upstream = tcpConnect(target.port, target.host);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.pipe(upstream);
    let pending = Buffer.alloc(0);
    upstream.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const end = afterReadyForQuery(pending);
      if (end < 0) return;
      upstream.removeAllListeners("data");
      upstream.destroy();
      state.fatals += 1;
      client.end(Buffer.concat([pending.subarray(0, end), fatal57P01()]));
    });
  });
  const port = await listenOnLoopback(server);
  return {
    port,
    get fatals() {
      return state.fatals;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const served = backends().filter((b) => b.name === "postgres");
// A file with no suite fails the run: without PostgreSQL (FORGE_TEST_BACKENDS), say why it is empty.
describe.skipIf(served.length > 0)("a FATAL at checkout", () => it.skip("needs PostgreSQL (FORGE_TEST_BACKENDS)", () => undefined));

describe.each(served)("a FATAL in the same chunk as a new connection's ReadyForQuery ($name)", (backend) => {
  let t: TestDatabase;
  let proxy: Awaited<ReturnType<typeof startFatalProxy>>;
  let db: JobsDatabase;

  beforeAll(async () => {
    t = await backend.create();
    proxy = await startFatalProxy(hostAndPort(t.url, 5432));
    db = connect(viaProxy(t.url, proxy), { schema: t.schema, poolSize: 2 });
  });
  afterAll(async () => {
    await db?.close().catch(() => undefined);
    await proxy?.close();
    await t?.close();
  });

  it("fails the call with the server's error instead of crashing the process with an unhandled 'error' event", async () => {
    const crashes: unknown[] = [];
    const onUncaught = (error: unknown) => crashes.push(error);
    process.on("uncaughtException", onUncaught);
    try {
      // statusCounts and reclaim each run in a transaction on a connection checked out of the pool.
      for (const call of [() => statusCounts({ db }), () => reclaim({ db }), () => db.executor.transaction((tx) => tx.query("SELECT 1"))]) {
        await expect(call()).rejects.toThrow(/administrator command|not queryable|terminated/);
      }
      // Let any late 'error' emission surface before looking: a bounded observation window,
      // time-based on purpose, since it proves an absence (no crash), which sends no signal.
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      process.off("uncaughtException", onUncaught);
    }
    expect(proxy.fatals).toBeGreaterThanOrEqual(3);
    expect(crashes).toEqual([]);
  });
});
