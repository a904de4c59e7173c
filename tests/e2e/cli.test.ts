/**
 * The operator CLI as an operator runs it (a process per command, `bun src/cli.ts`):
 * help for every command, strict flags, and the app and key commands, with a running
 * server seeing each change on its next request.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { COMMANDS } from "../../src/cli/commands";
import { runCli, startServer, tempDatabase, type RunningServer } from "../helpers/server";

const db = tempDatabase();
let server: RunningServer;
beforeAll(async () => {
  server = await startServer({ databaseUrl: db.databaseUrl });
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

describe("help and usage errors", () => {
  test("--help lists every command and exits 0; each command has its own --help", async () => {
    const all = await runCli(db.databaseUrl, "--help");
    expect(all.code).toBe(0);
    for (const c of COMMANDS) expect(all.stdout).toContain(`cli ${c.name}`);
    for (const c of COMMANDS) {
      const one = await runCli(db.databaseUrl, ...c.name.split(" "), "--help");
      expect(one.code).toBe(0);
      expect(one.stdout).toContain(`cli ${c.name}`);
      expect(one.stdout).toContain(c.summary);
    }
  });

  test("an unknown command, a misspelt flag or a missing value exits 2 with the usage", async () => {
    const unknown = await runCli(db.databaseUrl, "app", "explode");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command: app explode");
    const misspelt = await runCli(db.databaseUrl, "app", "create", "--nmae", "x");
    expect(misspelt.code).toBe(2);
    expect(misspelt.stderr).toContain("--nmae");
    expect(misspelt.stderr).toContain("cli app create --name NAME");
    const missing = await runCli(db.databaseUrl, "app", "create");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--name is required");
    expect((await runCli(db.databaseUrl, "app", "update", "--app", "x")).stderr).toContain("nothing to change");
  });
});

describe("apps and keys", () => {
  test("update, disable and enable an app; list, rotate and revoke its keys; the server follows", async () => {
    const created = (await runCli(db.databaseUrl, "app", "create", "--name", "cli app", "--origin", "https://a.example")).json[0]!;
    const status = () => server.fetch("/api/v1/status?appUserId=u", { headers: { authorization: `Bearer ${created.secretKey}` } });
    expect((await status()).status).toBe(200);

    const updated = await runCli(db.databaseUrl, "app", "update", "--app", created.appId, "--name", "renamed", "--origin", "https://b.example", "--max-grant-usd", "2.5");
    expect(updated.code).toBe(0);
    expect(updated.json[0]).toEqual({ appId: created.appId, name: "renamed", origins: ["https://b.example"], maxGrantUsd: 2.5 });
    expect((await runCli(db.databaseUrl, "app", "update", "--app", "appnope", "--name", "x")).code).toBe(1);

    expect((await runCli(db.databaseUrl, "app", "disable", "--app", created.appId)).json[0]).toEqual({ appId: created.appId, disabled: true });
    expect((await status()).status).toBe(401);
    const listed = (await runCli(db.databaseUrl, "app", "list")).json.find((a) => a.appId === created.appId)!;
    expect(listed.disabledAt).toEqual(expect.any(String));
    expect((await runCli(db.databaseUrl, "app", "enable", "--app", created.appId)).code).toBe(0);
    expect((await status()).status).toBe(200);

    const rotated = (await runCli(db.databaseUrl, "key", "rotate", "--app", created.appId)).json[0]!;
    const keys = await runCli(db.databaseUrl, "key", "list", "--app", created.appId);
    expect(keys.json.map((k) => k.keyId)).toEqual([created.keyId, rotated.keyId]);
    expect(keys.stdout).not.toContain(created.secretKey.split("_").pop()!);
    expect((await runCli(db.databaseUrl, "key", "revoke", "--app", created.appId, "--key", created.keyId)).code).toBe(0);
    expect((await status()).status).toBe(401);
    expect((await runCli(db.databaseUrl, "key", "list", "--app", "appnope")).code).toBe(1);
  });
});
