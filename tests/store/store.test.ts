import { afterEach, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { MIGRATIONS } from "../../src/store/sqlite/migrations";
import { createAppWithKey, issueKey } from "../../src/services/operator/secret-keys";

const cleanups: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "proxy-store-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function open(path: string): SqliteStore {
  const store = openSqliteStore(path);
  cleanups.unshift(() => store.close());
  return store;
}

describe("SQLite store", () => {
  test("creates a missing data folder, uses WAL and applies every migration once", async () => {
    const dir = tempDir();
    const path = join(dir, "nested", "data", "proxy.sqlite");
    expect(existsSync(join(dir, "nested"))).toBe(false);
    const store = open(path);
    expect(existsSync(path)).toBe(true);
    expect(store.db.query<{ journal_mode: string }, []>("PRAGMA journal_mode").get()!.journal_mode).toBe("wal");
    const versions = () =>
      store.db
        .query<{ version: number }, []>("SELECT version FROM schema_migrations ORDER BY version")
        .all()
        .map((r) => r.version);
    expect(versions()).toEqual(MIGRATIONS.map((m) => m.version));
    await store.close();
    cleanups.shift();

    // Reopening applies nothing twice and keeps the data.
    const again = open(path);
    expect(again.db.query<{ n: number }, []>("SELECT count(*) AS n FROM schema_migrations").get()!.n).toBe(MIGRATIONS.length);
  });

  test("migrations are numbered 1..n without gaps", async () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_m, i) => i + 1));
  });

  test("a database at an older version gets only the newer migrations", async () => {
    const dir = tempDir();
    const path = join(dir, "old.sqlite");
    const db = new Database(path, { create: true, strict: true });
    db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)");
    db.exec(MIGRATIONS[0]!.sql);
    db.query("INSERT INTO schema_migrations VALUES (1, 'first', 0)").run();
    db.query("INSERT INTO apps (id, name, origins_json, created_at) VALUES ('appkept0001', 'kept', '[]', 0)").run();
    db.close();
    const store = open(path);
    expect((await store.apps.find("appkept0001"))?.name).toBe("kept");
    expect(store.db.query<{ n: number }, []>("SELECT count(*) AS n FROM schema_migrations").get()!.n).toBe(MIGRATIONS.length);
  });

  test("migration 13 keeps every journal entry and its payer, and keys the journal by request id alone", async () => {
    const path = join(tempDir(), "journal.sqlite");
    const db = new Database(path, { create: true, strict: true });
    db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)");
    for (const m of MIGRATIONS.filter((m) => m.version <= 12)) {
      db.exec(m.sql);
      db.query("INSERT INTO schema_migrations VALUES (?, ?, 0)").run(m.version, m.name);
    }
    db.exec(`INSERT INTO call_journal (request_id, owner, account, app_id, period, model, streamed, started_at, reserved_nano, cap_nano,
               generation_id, reconcile_reason, attempts, next_attempt_at, payer)
             VALUES ('req-in-flight', 'instance-a', 'acct', 'app1', '2026-11', 'm/x', 1, 5, 700, 9000, 'gen-1', 'timeout', 2, 77, 'user')`);
    db.close();
    const store = open(path);
    expect(await store.callJournal.find("req-in-flight")).toMatchObject({
      owner: "instance-a",
      generationId: "gen-1",
      reconcileReason: "timeout",
      attempts: 2,
      payer: "user",
      reservedNano: 700,
    });
    const table = store.db.query<{ sql: string }, []>("SELECT sql FROM sqlite_schema WHERE name = 'call_journal'").get()!.sql;
    expect(table).toContain("WITHOUT ROWID");
    const indexes = store.db
      .query<{ name: string }, []>("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'call_journal' AND sql IS NOT NULL ORDER BY name")
      .all()
      .map((r) => r.name);
    expect(indexes).toEqual(["call_journal_by_ceiling", "call_journal_due"]);
  });

  test("two stores on one file see each other's writes (the CLI and a running server)", async () => {
    const path = join(tempDir(), "shared.sqlite");
    const server = open(path);
    const cli = open(path);
    const { app } = await createAppWithKey(cli.apps, "from cli", ["https://x.example"], 1);
    expect(await server.apps.find(app.id)).toMatchObject({ name: "from cli", origins: ["https://x.example"] });
    expect(await server.apps.isRegisteredOrigin("https://x.example")).toBe(true);
  });
});

describe("apps and keys", () => {
  test("create, find, list, count", async () => {
    const store = open(":memory:");
    expect(await store.apps.count()).toBe(0);
    const one = await createAppWithKey(store.apps, "one", [], 10);
    const two = await createAppWithKey(store.apps, "two", ["https://two.example"], 20);
    expect(await store.apps.count()).toBe(2);
    expect((await store.apps.list()).map((a) => a.name)).toEqual(["one", "two"]);
    expect(await store.apps.find(two.app.id)).toMatchObject({ id: two.app.id, name: "two", origins: ["https://two.example"], createdAt: 20, disabledAt: null });
    expect(await store.apps.find("appmissing")).toBeNull();
    expect(one.key.keyId).not.toBe(two.key.keyId);
    expect((await store.apps.keysOf(one.app.id)).map((k) => k.id)).toEqual([one.key.keyId]);
  });

  test("rotation keeps several active keys; revoking one leaves the others", async () => {
    const store = open(":memory:");
    const { app, key } = await createAppWithKey(store.apps, "a", [], 1);
    const second = await issueKey(store.apps, app.id, 2);
    expect((await store.apps.activeKeysOf(app.id)).map((k) => k.id).sort()).toEqual([key.keyId, second.keyId].sort());
    expect(await store.apps.revokeKey(app.id, key.keyId, 3)).toBe(true);
    expect((await store.apps.activeKeysOf(app.id)).map((k) => k.id)).toEqual([second.keyId]);
    expect((await store.apps.keysOf(app.id)).find((k) => k.id === key.keyId)?.revokedAt).toBe(3);
  });

  test("isRegisteredOrigin matches exact origins of active apps only", async () => {
    const store = open(":memory:");
    const { app } = await createAppWithKey(store.apps, "a", ["https://a.example", "http://localhost:3000"], 1);
    expect(await store.apps.isRegisteredOrigin("https://a.example")).toBe(true);
    expect(await store.apps.isRegisteredOrigin("http://localhost:3000")).toBe(true);
    expect(await store.apps.isRegisteredOrigin("https://a.example/")).toBe(false);
    expect(await store.apps.isRegisteredOrigin("https://A.example")).toBe(false);
    expect(await store.apps.isRegisteredOrigin("%")).toBe(false);
    store.db.query("UPDATE apps SET disabled_at = 5 WHERE id = ?").run(app.id);
    expect(await store.apps.isRegisteredOrigin("https://a.example")).toBe(false);
  });
});

describe("connections", () => {
  test("approve, update, revoke, re-approve keep connectedAt and funding state right", async () => {
    const store = open(":memory:");
    const { app } = await createAppWithKey(store.apps, "a", [], 1);
    expect(await store.connections.find(app.id, "u")).toBeNull();

    await store.connections.approve(app.id, "u", 5_000, 100);
    await store.connections.markFundingInvalid(app.id, "u", 150);
    expect(await store.connections.findActive(app.id, "u")).toMatchObject({
      monthlyCapNano: 5_000,
      fundingStatus: "invalid",
      connectedAt: 100,
      updatedAt: 150,
    });

    await store.connections.approve(app.id, "u", 7_000, 200);
    expect(await store.connections.findActive(app.id, "u")).toMatchObject({
      monthlyCapNano: 7_000,
      fundingStatus: "ok",
      connectedAt: 100,
      updatedAt: 200,
      revokedAt: null,
    });

    await store.connections.revoke(app.id, "u", 300);
    await store.connections.revoke(app.id, "u", 400); // no-op: the first revoke time stays
    expect(await store.connections.findActive(app.id, "u")).toBeNull();
    expect(await store.connections.find(app.id, "u")).toMatchObject({ revokedAt: 300, updatedAt: 300 });

    await store.connections.approve(app.id, "u", 1_000, 500);
    expect(await store.connections.findActive(app.id, "u")).toMatchObject({ monthlyCapNano: 1_000, connectedAt: 500, revokedAt: null });
  });

  test("every query is scoped by app id", async () => {
    const store = open(":memory:");
    const a = (await createAppWithKey(store.apps, "a", [], 1)).app;
    const b = (await createAppWithKey(store.apps, "b", [], 1)).app;
    await store.connections.approve(a.id, "u", 1, 1);
    expect(await store.connections.find(b.id, "u")).toBeNull();
    await store.connections.revoke(b.id, "u", 2);
    await store.connections.markFundingInvalid(b.id, "u", 2);
    expect(await store.connections.findActive(a.id, "u")).toMatchObject({ fundingStatus: "ok", revokedAt: null });
  });
});

describe("settings", () => {
  test("getOrCreate stores the first value and returns it ever after", async () => {
    const path = join(tempDir(), "s.sqlite");
    const store = open(path);
    let calls = 0;
    const first = await store.settings.getOrCreate("jwt_secret", () => `v${++calls}`);
    expect(first).toBe("v1");
    expect(await store.settings.getOrCreate("jwt_secret", () => `v${++calls}`)).toBe("v1");
    const other = open(path);
    expect(await other.settings.get("jwt_secret")).toBe("v1");
    expect(await other.settings.get("missing")).toBeNull();
  });
});
