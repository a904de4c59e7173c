/**
 * PostgreSQL migration 22: the transaction that reserves (and journals) a batch of calls
 * commits with the server's own durability, although the rate-limit checks it runs turn
 * durable commits off for themselves; and a server whose commits do not wait for their WAL
 * is named at start (src/store/postgres/commit-durability.ts).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { memoryLogger } from "../../src/logger";
import { openPostgresStore } from "../../src/store/postgres";
import { warnIfCommitsNotDurable } from "../../src/store/postgres/commit-durability";
import { startPostgres, type TestPostgres } from "../helpers/postgres";

let durable: TestPostgres;
let fast: TestPostgres;
beforeAll(async () => {
  [durable, fast] = await Promise.all([startPostgres({ durableCommits: true }), startPostgres()]);
});
afterAll(async () => {
  await Promise.all([durable?.destroy(), fast?.destroy()]);
});

/** A reserve with a rate-limit check, as a chat call's, in the shape budget_reserve_limited_many takes. */
const items = JSON.stringify([
  { account: "u/app/2026-12/ann", request: "r1", cap: 1000, min: 1, desired: 10, check: { key: "chat:app:ann", limit: 10, window: 60000, now: Date.now() } },
]);

test("the reserve's transaction commits durably: the check inside it no longer turns that off", async () => {
  const url = await durable.createDatabase();
  await (await openPostgresStore(url, { poolSize: 1 })).close();
  const sql = new SQL(url, { max: 1 });
  try {
    const settingAfter = async (fn: string) => {
      const conn = await sql.reserve();
      try {
        await conn`BEGIN`;
        await conn.unsafe(`SELECT * FROM ${fn}('${items.replace(/'/g, "''")}'::jsonb, 'test')`);
        const [row] = await conn`SELECT current_setting('synchronous_commit') AS value`;
        await conn`ROLLBACK`;
        return (row as { value: string }).value;
      } finally {
        conn.release();
      }
    };
    expect(await settingAfter("budget_reserve_limited_many")).toBe("off");
    expect(await settingAfter("budget_reserve_durable")).toBe("on");
  } finally {
    await sql.close({ timeout: 0 });
  }
});

test("a server whose commits do not wait for the WAL is named at start; one whose do is not", async () => {
  for (const [server, warned] of [
    [fast, true],
    [durable, false],
  ] as const) {
    const store = await openPostgresStore(await server.createDatabase(), { poolSize: 1 });
    try {
      const logger = memoryLogger();
      await warnIfCommitsNotDurable(store.database, logger);
      expect(logger.lines.some((l) => l.includes("synchronous_commit is off"))).toBe(warned);
    } finally {
      await store.close();
    }
  }
});
