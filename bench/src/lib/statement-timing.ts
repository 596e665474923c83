import { performance } from "node:perf_hooks";

/**
 * Time spent in each statement shape, measured from the caller's side of @forge/jobs's Executor
 * seam (or of a driver's methods): from the call to the answer, queueing behind other
 * statements on the same connection included. Statements in flight at the same time overlap,
 * so the shapes' sums can exceed the wall time; `busyMs` counts the time with at least one
 * statement in flight, once.
 */
export class StatementClock {
  /** Per shape: calls, summed time, and time with at least one call of it in flight (`busyMs`). */
  readonly shapes = new Map<string, { count: number; ms: number; busyMs: number; inFlight: number; since: number }>();
  private inFlight = 0;
  private busySince = 0;
  busyMs = 0;
  enabled = false;

  /**
   * Starts one statement; the returned function ends it. `statement` false: a span that holds
   * statements and other work (a whole transaction), kept out of `busyMs`.
   */
  begin(shape: string, statement = true): () => void {
    if (!this.enabled) return () => undefined;
    const t0 = performance.now();
    if (statement && this.inFlight++ === 0) this.busySince = t0;
    let entry = this.shapes.get(shape);
    if (!entry) this.shapes.set(shape, (entry = { count: 0, ms: 0, busyMs: 0, inFlight: 0, since: 0 }));
    if (entry.inFlight++ === 0) entry.since = t0;
    const own = entry;
    return () => {
      const t1 = performance.now();
      own.count++;
      own.ms += t1 - t0;
      if (--own.inFlight === 0) own.busyMs += t1 - own.since;
      if (statement && --this.inFlight === 0) this.busyMs += t1 - this.busySince;
    };
  }

  /** Times a promise-returning call. */
  async time<T>(shape: string, run: () => Promise<T>, statement = true): Promise<T> {
    const end = this.begin(shape, statement);
    try {
      return await run();
    } finally {
      end();
    }
  }

  /** Times a synchronous call (a better-sqlite3 statement). */
  timeSync<T>(shape: string, run: () => T): T {
    const end = this.begin(shape);
    try {
      return run();
    } finally {
      end();
    }
  }

  reset(): void {
    this.shapes.clear();
    this.busyMs = 0;
    this.inFlight = 0;
  }
}

/** A statement's shape: its text with whitespace collapsed and quoted qualifiers (schema names) taken out, first 60 characters. */
export function shapeOf(sql: string): string {
  const s = sql
    .replace(/\s+/g, " ")
    .replace(/["`][A-Za-z0-9_]+["`]\./g, "")
    .trim();
  return s.length > 60 ? `${s.slice(0, 60)}…` : s;
}

type AnyFn = (...args: unknown[]) => unknown;

/**
 * The same executor with every statement timed: `query`, and everything that hands out another
 * executor (a transaction's, a worker's view, a pooled session) or sends statements another way
 * (PostgreSQL's ordered sender for start writes) hands out a timed one. A transaction is timed
 * as a whole too, under "(transaction …)": its BEGIN/COMMIT and the work between its statements.
 * Methods run on the real object, so its private state and `instanceof` checks still hold.
 */
export function timedExecutor<E extends object>(executor: E, clock: StatementClock): E {
  const wrapped = new WeakMap<object, unknown>();
  const wrap = <T>(target: T): T => {
    if (!target || typeof target !== "object") return target;
    const known = wrapped.get(target);
    if (known) return known as T;
    const proxy = new Proxy(target, {
      get(obj, key) {
        const value = Reflect.get(obj, key, obj) as unknown;
        if (typeof value !== "function") return value;
        const fn = value as AnyFn;
        switch (key) {
          case "query":
            return (sql: string, ...rest: unknown[]) => clock.time(shapeOf(sql), () => fn.call(obj, sql, ...rest) as Promise<unknown>);
          case "transaction":
          case "session":
            return (work: AnyFn, ...rest: unknown[]) =>
              clock.time(
                `(${String(key)}: whole, statements inside included)`,
                () => fn.call(obj, (tx: object) => work(wrap(tx)), ...rest) as Promise<unknown>,
                false,
              );
          case "forWorker":
          case "orderedSender":
            return (...args: unknown[]) => wrap(fn.apply(obj, args));
          case "send":
            return (sql: string, ...rest: unknown[]) => {
              const end = clock.begin(`${shapeOf(sql)} (ordered sender)`);
              const out = fn.call(obj, sql, ...rest) as { sent: Promise<void>; result: Promise<unknown> };
              out.result.then(end, end);
              return out;
            };
          default:
            return fn.bind(obj);
        }
      },
    });
    wrapped.set(target, proxy);
    return proxy;
  };
  return wrap(executor);
}

interface SqliteStatementLike {
  readonly source: string;
  readonly database: unknown;
}

/**
 * better-sqlite3's own time per statement on one Database: its Statement methods and `exec`
 * (BEGIN, COMMIT) patched on their prototypes, counting only calls on `raw`. Synchronous, so this
 * is the time inside SQLite and the driver, with no waiting for a turn. Returns the undo.
 */
export function timeSqliteDriver(raw: object, clock: StatementClock): () => void {
  const db = raw as { prepare(sql: string): object; exec: AnyFn };
  const statementProto = Object.getPrototypeOf(db.prepare("SELECT 1")) as Record<string, AnyFn>;
  const databaseProto = Object.getPrototypeOf(raw) as Record<string, AnyFn>;
  const undo: (() => void)[] = [];
  const patch = (proto: Record<string, AnyFn>, name: string, shape: (self: unknown, args: unknown[]) => string | null) => {
    const original = proto[name]!;
    proto[name] = function (this: unknown, ...args: unknown[]) {
      const s = shape(this, args);
      return s === null ? original.apply(this, args) : clock.timeSync(s, () => original.apply(this, args));
    };
    undo.push(() => (proto[name] = original));
  };
  for (const name of ["run", "all", "get", "iterate"]) {
    patch(statementProto, name, (self) => ((self as SqliteStatementLike).database === raw ? shapeOf((self as SqliteStatementLike).source) : null));
  }
  patch(databaseProto, "exec", (self, args) => (self === raw ? shapeOf(String(args[0])) : null));
  return () => undo.reverse().forEach((u) => u());
}
