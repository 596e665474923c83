import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  createMailHandler,
  createSqlSuppressionList,
  listUnsubscribeHeaders,
  messageToPayload,
  suppressionTableSql,
  type SuppressionList,
} from "../src/index.js";
import { BACKENDS, type TestDatabase } from "./helpers/databases.js";
import { startSmtpServer, type TestSmtpServer } from "./helpers/smtp.js";

const stored = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown;

describe.each(BACKENDS)("SQL suppression list on $name", (backend) => {
  let db: TestDatabase;
  let list: SuppressionList;
  let table = 0;
  const servers: TestSmtpServer[] = [];

  beforeAll(async () => {
    db = await backend.create();
  });
  afterAll(() => db.close());
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => server.close()));
  });

  /** A fresh table per test: the DDL is run twice, as every start of an app would. */
  async function freshList(): Promise<SuppressionList> {
    const name = `suppressions_${++table}`;
    for (let round = 0; round < 2; round++) for (const statement of suppressionTableSql(db.dialect, { table: name })) await db.query(statement, []);
    list = createSqlSuppressionList({ query: db.query, dialect: db.dialect, table: name });
    return list;
  }

  it("adds, finds (case-insensitively, answering with the addresses as given), lists and removes", async () => {
    await freshList();
    await list.add([
      { address: "Bounced@Example.com", reason: "hard-bounce", detail: "dsn: smtp; 550 5.1.1 user unknown" },
      { address: "angry@example.net", reason: "complaint" },
    ]);
    expect(await list.isSuppressed(["bounced@example.COM", "fine@example.org", "angry@example.net"])).toEqual([
      { address: "bounced@example.COM", reason: "hard-bounce" },
      { address: "angry@example.net", reason: "complaint" },
    ]);
    expect(await list.isSuppressed([])).toEqual([]);

    const entries = await list.list();
    expect(entries.map(({ address, reason, detail }) => ({ address, reason, detail }))).toEqual([
      { address: "angry@example.net", reason: "complaint", detail: null },
      { address: "bounced@example.com", reason: "hard-bounce", detail: "dsn: smtp; 550 5.1.1 user unknown" },
    ]);
    for (const entry of entries) {
      expect(entry.createdAt).toBeInstanceOf(Date);
      expect(Math.abs(entry.createdAt.getTime() - Date.now())).toBeLessThan(60_000);
    }

    expect(await list.remove(["BOUNCED@example.com", "never@example.org"])).toBe(1);
    expect(await list.isSuppressed(["bounced@example.com"])).toEqual([]);
  });

  it("keeps the first reason, except that an unsubscribe gives way to a bounce, complaint or manual entry", async () => {
    await freshList();
    await list.add([
      { address: "a@example.com", reason: "unsubscribe" },
      { address: "b@example.com", reason: "hard-bounce" },
    ]);
    await list.add([
      { address: "a@example.com", reason: "complaint", detail: "abuse" },
      { address: "b@example.com", reason: "unsubscribe" },
    ]);
    const entries = await list.list();
    expect(entries.map((e) => [e.address, e.reason, e.detail])).toEqual([
      ["a@example.com", "complaint", "abuse"],
      ["b@example.com", "hard-bounce", null],
    ]);
  });

  it("pages by address and filters by reason; more addresses than one statement takes", async () => {
    await freshList();
    const many = Array.from({ length: 450 }, (_, i) => ({
      address: `user${String(i).padStart(3, "0")}@example.com`,
      reason: i % 3 === 0 ? ("manual" as const) : ("unsubscribe" as const),
    }));
    await list.add(many);
    expect(await list.isSuppressed(many.map((m) => m.address.toUpperCase()))).toHaveLength(450);
    const first = await list.list({ limit: 10 });
    expect(first.map((e) => e.address)).toEqual(many.slice(0, 10).map((m) => m.address));
    const second = await list.list({ limit: 10, after: first.at(-1)!.address });
    expect(second[0]!.address).toBe("user010@example.com");
    const manual = await list.list({ reason: "manual", limit: 1000 });
    expect(manual).toHaveLength(150);
    expect(await list.remove(many.map((m) => m.address))).toBe(450);
  });

  it("writes inside the caller's transaction: rolled back, nothing is listed", async () => {
    const name = `suppressions_${++table}`;
    for (const statement of suppressionTableSql(db.dialect, { table: name })) await db.query(statement, []);
    await db.transaction(
      (query) => createSqlSuppressionList({ query, dialect: db.dialect, table: name }).add([{ address: "x@example.com", reason: "manual" }]),
      "rollback",
    );
    expect(await createSqlSuppressionList({ query: db.query, dialect: db.dialect, table: name }).list()).toEqual([]);
  });

  it("refuses bad input with a message saying what to fix, and writes nothing", async () => {
    await freshList();
    await expect(list.add([{ address: "a@example.com", reason: "bounced" as never }])).rejects.toThrow(
      /reason must be hard-bounce, complaint, unsubscribe or manual/,
    );
    await expect(list.add([{ address: " ", reason: "manual" }])).rejects.toThrow(/entries\[0\]\.address/);
    await expect(list.list({ limit: 0 })).rejects.toThrow(/limit must be an integer from 1 to 1000/);
    expect(await list.list()).toEqual([]);
    expect(() => createSqlSuppressionList({ query: db.query, dialect: "oracle" as never })).toThrow(/dialect must be/);
    expect(() => createSqlSuppressionList({ query: db.query, dialect: db.dialect, placeholders: ":1" as never })).toThrow(/placeholders must be "\$n" or "\?"/);
    expect(() => suppressionTableSql(db.dialect, { table: "x; DROP TABLE y" })).toThrow(/table must be a name/);
  });

  it("the handler skips suppressed recipients, reports them, and sends to the others", async () => {
    await freshList();
    await list.add([
      { address: "bounced@example.com", reason: "hard-bounce" },
      { address: "gone@example.com", reason: "unsubscribe" },
    ]);
    const server = await startSmtpServer();
    servers.push(server);
    const send = createMailHandler({ transport: server.url, suppression: list });

    const result = await send(
      stored(
        messageToPayload({
          from: "shop@example.org",
          to: ["Bounced@example.com", "alice@example.com"],
          cc: "gone@example.com",
          subject: "Newsletter",
          text: "Hello",
          headers: listUnsubscribeHeaders("https://shop.example.org/unsubscribe?token=t"),
        }),
      ),
    );
    expect(result.accepted).toEqual(["alice@example.com"]);
    expect(result.suppressed).toEqual([
      { address: "Bounced@example.com", reason: "hard-bounce" },
      { address: "gone@example.com", reason: "unsubscribe" },
    ]);
    expect(server.rcptSeen).toEqual(["alice@example.com"]);
    expect(server.delivered[0]!.raw).not.toMatch(/bounced@|gone@/i);

    // Not bulk (no List-Unsubscribe): an unsubscribe does not hold back a password reset.
    const transactional = await send(
      stored(messageToPayload({ from: "shop@example.org", to: ["gone@example.com", "bounced@example.com"], subject: "Reset", text: "Code" })),
    );
    expect(transactional.accepted).toEqual(["gone@example.com"]);
    expect(transactional.suppressed).toEqual([{ address: "bounced@example.com", reason: "hard-bounce" }]);
  });

  it("a message whose recipients are all suppressed is not sent, and the job ends with a result saying so", async () => {
    await freshList();
    await list.add([{ address: "bounced@example.com", reason: "hard-bounce" }]);
    const server = await startSmtpServer();
    servers.push(server);
    const send = createMailHandler({ transport: server.url, suppression: list });
    const result = await send(stored(messageToPayload({ from: "shop@example.org", to: "bounced@example.com", subject: "Hi", text: "Hello" })));
    expect(result).toEqual({
      messageId: "",
      accepted: [],
      rejected: [],
      response: "",
      suppressed: [{ address: "bounced@example.com", reason: "hard-bounce" }],
      skipped: "all-recipients-suppressed",
    });
    expect(server.connections).toBe(0);
  });
});

describe("createMailHandler's suppression option", () => {
  it("refuses something that is not a suppression list at start-up", () => {
    expect(() => createMailHandler({ transport: "smtp://127.0.0.1:1", suppression: {} as never })).toThrow(/suppression must be a SuppressionList/);
  });
});
