/**
 * The Postgres test harness itself: later store tests trust it to restart without losing
 * data, to give each test an empty database, and to clean up after itself.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { SQL } from "bun";
import { startPostgres, type TestPostgres } from "../helpers/postgres";

let pg: TestPostgres;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.destroy();
});

// connect_timeout keeps the "server is down" case quick; onnotice silences CREATE notices.
const connect = (url: string) => new SQL(url, { max: 1, connectionTimeout: 2 });

test("answers queries as superuser proxy", async () => {
  const sql = connect(pg.url);
  try {
    const [row] = await sql`select current_user as who, 1 + 1 as two`;
    expect(row).toEqual({ who: "proxy", two: 2 });
  } finally {
    await sql.close();
  }
});

test("stop refuses connections; start again keeps the data written before", async () => {
  const sql = connect(pg.url);
  await sql`create table kept (id int primary key, note text)`;
  await sql`insert into kept values (1, 'before restart')`;
  await sql.close();

  await pg.stop();
  const down = connect(pg.url);
  await expect(down`select 1`).rejects.toThrow();
  await down.close({ timeout: 0 });

  await pg.start();
  const again = connect(pg.url);
  try {
    expect([...(await again`select id, note from kept`)]).toEqual([{ id: 1, note: "before restart" }]);
  } finally {
    await again.close();
  }
});

test("createDatabase gives a distinct, empty database", async () => {
  const first = await pg.createDatabase();
  const second = await pg.createDatabase();
  expect(first).not.toBe(second);
  expect(first).toStartWith(`postgres://proxy@127.0.0.1:${pg.port}/`);
  const sql = connect(first);
  try {
    const tables = await sql`select table_name from information_schema.tables where table_schema = 'public'`;
    expect(tables).toHaveLength(0);
  } finally {
    await sql.close();
  }
  expect(await pg.createDatabase("named_db")).toEndWith("/named_db");
});

test("destroy stops the server and removes its folder", async () => {
  const other = await startPostgres();
  expect(existsSync(other.dataDir)).toBe(true);
  await other.destroy();
  expect(existsSync(other.dataDir)).toBe(false);
  const sql = connect(other.url);
  await expect(sql`select 1`).rejects.toThrow();
  await sql.close({ timeout: 0 });
});
