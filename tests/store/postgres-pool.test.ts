/**
 * The PostgreSQL pool's bounds (src/store/postgres/database.ts): a full pool answers 503
 * `unavailable` within the acquire deadline instead of queueing without end, a connection
 * is given back even when the work throws, and a transaction abandoned open is ended by
 * the server so that its connection returns to the pool.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { PostgresDatabase } from "../../src/store/postgres/database";
import { ApiError } from "../../src/errors";
import { startPostgres, type TestPostgres } from "../helpers/postgres";

let pg: TestPostgres;
let url: string;
beforeAll(async () => {
  pg = await startPostgres();
  url = await pg.createDatabase();
});
afterAll(async () => {
  await pg?.destroy();
});

test("with its only connection held, the next call fails with `unavailable`, and works once it is given back", async () => {
  const db = new PostgresDatabase(url, { poolSize: 1, statementTimeoutMs: 300 });
  try {
    let release!: () => void;
    const held = db.run(async (sql) => {
      await sql`SELECT 1`;
      await new Promise<void>((resolve) => (release = resolve));
    });
    while (!release) await Bun.sleep(5);
    const refused = await db
      .run((sql) => sql`SELECT 1`)
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).code).toBe("unavailable");
    release();
    await held;
    expect(await db.run((sql) => sql`SELECT 2 AS two`)).toEqual([{ two: 2 }]);
    // A statement error gives the connection back too.
    await expect(db.run((sql) => sql`SELECT 1/0`)).rejects.toThrow();
    expect(await db.run((sql) => sql`SELECT 3 AS three`)).toEqual([{ three: 3 }]);
  } finally {
    await db.close();
  }
});

test("a statement running past the timeout is cancelled by the server: 503 `unavailable`, and the pool goes on", async () => {
  const db = new PostgresDatabase(url, { poolSize: 1, statementTimeoutMs: 200 });
  try {
    const err = await db
      .run((sql) => sql`SELECT pg_sleep(5)`)
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect((err as ApiError).code).toBe("unavailable");
    expect(await db.run((sql) => sql`SELECT 1 AS one`)).toEqual([{ one: 1 }]);
  } finally {
    await db.close();
  }
});

test("a transaction left open on a raw connection is ended by the server (idle_in_transaction_session_timeout)", async () => {
  const db = new PostgresDatabase(url, { poolSize: 2, statementTimeoutMs: 200 });
  try {
    const conn = await db.sql.reserve();
    await conn`BEGIN`;
    await conn`SELECT 1`;
    // Abandoned: never committed, never released. The server ends the session after 2 × the timeout.
    const openTransactions = async () =>
      (await db.run((sql) => sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'idle in transaction' AND datname = current_database()`))[0]
        .n as number;
    expect(await openTransactions()).toBe(1);
    let ended = false;
    for (let i = 0; i < 100 && !ended; i++) {
      await Bun.sleep(50);
      ended = (await openTransactions()) === 0;
    }
    expect(ended).toBe(true);
    conn.release();
  } finally {
    await db.close();
  }
});

test("the pool's sessions run without JIT compilation, whatever the server's default", async () => {
  const db = new PostgresDatabase(url, { poolSize: 1 });
  try {
    // The test server keeps PostgreSQL's default (on): a plain session has it.
    const plain = new SQL(url, { max: 1 });
    try {
      expect(await plain`SHOW jit`).toEqual([{ jit: "on" }]);
    } finally {
      await plain.close({ timeout: 0 });
    }
    expect(await db.run((sql) => sql`SHOW jit`)).toEqual([{ jit: "off" }]);
  } finally {
    await db.close();
  }
});
