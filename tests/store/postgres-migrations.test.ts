/**
 * PostgreSQL migrations under the advisory lock: instances that start together on an
 * empty database apply each migration exactly once, and the CLI runs against it.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { openPostgresStore } from "../../src/store/postgres";
import { PG_MIGRATIONS } from "../../src/store/postgres/migrations";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { runCli } from "../helpers/server";

let pg: TestPostgres;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.destroy();
});

test("five instances opening an empty database at once apply every migration once", async () => {
  const url = await pg.createDatabase();
  const stores = await Promise.all(Array.from({ length: 5 }, () => openPostgresStore(url, { poolSize: 2 })));
  await Promise.all(stores.map((s) => s.close()));
  const sql = new SQL(url, { max: 1 });
  try {
    const rows: Array<{ version: number }> = await sql`SELECT version FROM schema_migrations ORDER BY version`;
    expect(rows.map((r) => Number(r.version))).toEqual(PG_MIGRATIONS.map((m) => m.version));
  } finally {
    await sql.close({ timeout: 0 });
  }
});

test("the operator CLI creates, lists and revokes against PostgreSQL", async () => {
  const url = await pg.createDatabase();
  const created = await runCli(url, "app", "create", "--name", "on postgres", "--origin", "https://a.example");
  expect(created.code).toBe(0);
  const { appId, keyId } = created.json[0]!;
  const listed = await runCli(url, "app", "list");
  expect(listed.json.map((a) => a.appId)).toEqual([appId]);
  expect((await runCli(url, "key", "rotate", "--app", appId)).code).toBe(0);
  expect((await runCli(url, "key", "revoke", "--app", appId, "--key", keyId)).code).toBe(0);
  expect((await runCli(url, "key", "revoke", "--app", appId, "--key", keyId)).code).toBe(1);
});
