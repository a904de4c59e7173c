/**
 * A proxy SIGKILLed with streams open that a user pays for with their own upstream key
 * (issue 34): the process on the same file after it settles them from the upstream's records,
 * looked up with that user's key (the journal kept the payer), at what the upstream billed the
 * user's key; the operator's key is billed nothing and used for no lookup. The mock runs in
 * this process behind a handler that notes the Authorization of every record lookup.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { E2E_UPSTREAM_KEY, eventually, nano, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { loadConfig } from "../../src/config";
import { resolveSecretBox } from "../../src/secrets/secrets-key";
import { openSqliteStore } from "../../src/store/sqlite";
import { readLedgerFile } from "./ledger-file";

const STREAMS = 3;
const stream = {
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: "A long one. [[mock tokens=40 pause_ms=50 no_cancel]]" }],
  max_tokens: 100,
  stream: true,
};

const journalEntries = (path: string) => {
  const db = new Database(path);
  try {
    return db.query<{ n: number }, []>("SELECT count(*) AS n FROM call_journal").get()!.n;
  } finally {
    db.close();
  }
};

describe(`SIGKILL with ${STREAMS} streams open on a user's own key`, () => {
  let stack: ProxyStack;
  let userKey: string;
  const lookups: string[] = [];

  beforeAll(async () => {
    stack = await startProxyStack({
      intercept: (request) => {
        if (new URL(request.url).pathname.endsWith("/generation")) lookups.push(request.headers.get("authorization") ?? "");
        return undefined;
      },
    });
    userKey = stack.mock.keys.create({ limitUsd: 5 }).key;
    // Linked as the PKCE callback links it, through the store the server shares.
    const databaseUrl = `sqlite:${stack.databasePath}`;
    const store = openSqliteStore(
      stack.databasePath,
      resolveSecretBox(loadConfig({ DATABASE_URL: databaseUrl }), () => {}),
    );
    await store.connections.approve(stack.appId, "una", 5e9, Date.now(), { source: "user", upstreamKey: userKey });
    await store.close();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  test("the next process settles them at the upstream's records, looked up with the user's key", async () => {
    const opened = await Promise.all(Array.from({ length: STREAMS }, () => stack.chat("una", stream)));
    for (const res of opened) expect(res.status).toBe(200);
    const readers = opened.map((r) => r.body!.getReader());
    await Promise.all(readers.map((reader) => reader.read()));
    stack.server.proc.kill("SIGKILL");
    await stack.server.proc.exited;
    for (const reader of readers) void reader.cancel().catch(() => {});

    await stack.restartServer();
    await eventually("every call the killed process left open is settled", () => journalEntries(stack.databasePath) === 0);
    const { rows } = readLedgerFile(stack.databasePath);
    expect(rows).toHaveLength(STREAMS);
    const billed = new Map(stack.mock.served.map((s) => [s.id, s.costUsd]));
    for (const row of rows) {
      expect(row).toMatchObject({ status: "instance_died", source: "generation" });
      expect(row.cost_nano).toBe(nano(billed.get(row.generation_id!)!));
    }
    expect(lookups.length).toBeGreaterThanOrEqual(STREAMS);
    expect(new Set(lookups)).toEqual(new Set([`Bearer ${userKey}`]));
    // The user's key paid what the ledger says; the operator's paid nothing.
    expect(nano(stack.mock.keys.get(userKey)!.usage.total)).toBe(rows.reduce((sum, r) => sum + r.cost_nano, 0));
    expect(stack.mock.keys.get(E2E_UPSTREAM_KEY)?.usage.total ?? 0).toBe(0);
  });
});
