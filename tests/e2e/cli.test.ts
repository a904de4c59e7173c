/**
 * The operator CLI as an operator runs it (a process per command, `bun src/cli.ts`):
 * help for every command and every group, with defaults and exit statuses a script can
 * trust, strict flags, and the app and key commands, with a running server seeing each
 * change on its next request.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { COMMANDS } from "../../src/cli/commands";
import { GROUPS, groupOf } from "../../src/cli/help";
import { connectOverHttp, REPO_ROOT, runCli, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { version } from "../../package.json";
import { pollUntil } from "../helpers/cluster";
import { openSqliteStore } from "../../src/store/sqlite";
import { approveConsentOrThrow } from "../helpers/grants";

const db = tempDatabase();
let server: RunningServer;
beforeAll(async () => {
  server = await startServer({ databaseUrl: db.databaseUrl });
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

/** A command's line in the listings: its words and flags (`app create --name NAME ...`). */
const listed = (c: (typeof COMMANDS)[number]) => `  ${c.name}${c.usage ? ` ${c.usage}` : ""}\n      ${c.summary}`;

describe("help and usage errors", () => {
  test("--help lists every command and exits 0; each command has its own --help, with the way to run it", async () => {
    const all = await runCli(db.databaseUrl, "--help");
    expect(all.code).toBe(0);
    // Started as `bun src/cli.ts`, not by a package manager: the README's command.
    expect(all.stdout).toStartWith("usage: npm run cli -- <command> [options]\n");
    for (const c of COMMANDS) expect(all.stdout).toContain(listed(c));
    for (const c of COMMANDS) {
      const one = await runCli(db.databaseUrl, ...c.name.split(" "), "--help");
      expect(one.code).toBe(0);
      expect(one.stdout).toStartWith(`usage: npm run cli -- ${c.name}`);
      expect(one.stdout).toContain(c.summary);
      // Every default the command declares is shown on its flag's line.
      const lines = one.stdout.split("\n");
      for (const [flag, meaning] of Object.entries(c.defaults ?? {})) {
        expect({ command: c.name, flag, shown: lines.some((l) => l.startsWith(`  ${flag} `) && l.endsWith(` ${meaning}`)) }).toEqual({
          command: c.name,
          flag,
          shown: true,
        });
      }
    }
  });

  test("each group's --help lists that group's commands only and exits 0; the group alone shows the same on stderr and exits 2", async () => {
    expect(GROUPS).toEqual(["app", "key", "connections", "grants", "usage", "webhook", "keys", "secrets"]);
    for (const group of GROUPS) {
      const help = await runCli(db.databaseUrl, group, "--help");
      expect({ group, code: help.code }).toEqual({ group, code: 0 });
      expect(help.stdout).toStartWith(`usage: npm run cli -- ${group} <command> [options]\n`);
      for (const c of COMMANDS) {
        if (groupOf(c) === group) expect(help.stdout).toContain(listed(c));
        else expect(help.stdout).not.toContain(listed(c));
      }
      const bare = await runCli(db.databaseUrl, group);
      expect({ group, code: bare.code, stdout: bare.stdout }).toEqual({ group, code: 2, stdout: "" });
      expect(bare.stderr).toStartWith(`${group}: which command?\n`);
      expect(bare.stderr).toContain(help.stdout.trimEnd());
    }
    // `help` in front is --help.
    expect((await runCli(db.databaseUrl, "help", "app")).stdout).toStartWith("usage: npm run cli -- app <command> [options]");
  });

  test("an unknown command exits 2 saying so, with or without --help; no command at all shows every command and exits 2", async () => {
    const mistakes: Array<[string[], string]> = [
      [["bogus"], "bogus"],
      [["bogus", "--help"], "bogus"],
      [["help", "bogus"], "bogus"],
      [["bogus", "create", "--name", "x"], "bogus create"],
    ];
    for (const [args, reported] of mistakes) {
      const run = await runCli(db.databaseUrl, ...args);
      expect({ args, code: run.code, stdout: run.stdout }).toEqual({ args, code: 2, stdout: "" });
      expect(run.stderr).toStartWith(`unknown command: ${reported}\n`);
      expect(run.stderr).toContain("app, key, connections, grants, usage, webhook, keys, secrets");
    }
    const withinGroup = await runCli(db.databaseUrl, "app", "explode", "--help");
    expect(withinGroup.code).toBe(2);
    expect(withinGroup.stderr).toStartWith("unknown command: app explode\n");
    expect(withinGroup.stderr).toContain("usage: npm run cli -- app <command> [options]");
    const nothing = await runCli(db.databaseUrl);
    expect({ code: nothing.code, stdout: nothing.stdout }).toEqual({ code: 2, stdout: "" });
    expect(nothing.stderr).toStartWith("usage: npm run cli -- <command> [options]\n");
  });

  test("a typo gets the nearest command: `keys rotate` is `key rotate`, `key rotate-kek` is `keys rotate-kek`; a far word gets none", async () => {
    const typos: Array<[string[], string]> = [
      [["keys", "rotate", "--app", "x"], "key rotate"],
      [["key", "rotate-kek"], "keys rotate-kek"],
      [["kye", "list"], "key list"],
      [["usage", "exprt"], "usage export"],
      [["apps"], "app"],
    ];
    for (const [args, meant] of typos) {
      const run = await runCli(db.databaseUrl, ...args);
      expect({ args, code: run.code, second: run.stderr.split("\n")[1] }).toEqual({ args, code: 2, second: `Did you mean \`npm run cli -- ${meant}\`?` });
    }
    for (const args of [["bogus"], ["app", "explode"]]) expect((await runCli(db.databaseUrl, ...args)).stderr).not.toContain("Did you mean");
  });

  test("--version prints the version and exits 0, as the program's own does", async () => {
    const run = await runCli(db.databaseUrl, "--version");
    expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  });

  test("a command's help shows what its flags mean when left out: usage export writes JSON lines", async () => {
    const exportHelp = await runCli(db.databaseUrl, "usage", "export", "--help");
    expect(exportHelp.stdout).toContain("as JSON lines (the default) or CSV");
    expect(exportHelp.stdout).toContain("defaults:\n  --format  jsonl: JSON lines, one object per row");
    const create = await runCli(db.databaseUrl, "app", "create", "--help");
    expect(create.stdout).toContain("--max-grant-usd            the service's DEFAULT_MAX_GRANT_USD (5 unless set)");
    expect(create.stdout).toContain("--grant-daily-ceiling-usd  the service's GRANT_DAILY_CEILING_USD (100 unless set)");
    expect((await runCli(db.databaseUrl, "webhook", "deliveries", "--help")).stdout).toContain("--limit     50 (at most 1000)");
  });

  test("an unknown command, a misspelt flag or a missing value exits 2 with the usage", async () => {
    const unknown = await runCli(db.databaseUrl, "app", "explode");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command: app explode");
    const misspelt = await runCli(db.databaseUrl, "app", "create", "--nmae", "x");
    expect(misspelt.code).toBe(2);
    expect(misspelt.stderr).toContain("--nmae");
    expect(misspelt.stderr).toContain("usage: npm run cli -- app create --name NAME");
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

    const updated = await runCli(
      db.databaseUrl,
      "app",
      "update",
      "--app",
      created.appId,
      "--name",
      "renamed",
      "--origin",
      "https://b.example",
      "--max-grant-usd",
      "2.5",
    );
    expect(updated.code).toBe(0);
    expect(updated.json[0]).toEqual({
      appId: created.appId,
      name: "renamed",
      origins: ["https://b.example"],
      maxGrantUsd: 2.5,
      grantDailyCeilingUsd: null,
      fundingSources: ["app"],
    });
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

describe("key revoke and the session tokens a key minted", () => {
  test("a running server refuses, from the revoke on, the session tokens the revoked key minted; the other key's keep working", async () => {
    const created = (await runCli(db.databaseUrl, "app", "create", "--name", "tokens", "--origin", "https://t.example")).json[0]!;
    const rotated = (await runCli(db.databaseUrl, "key", "rotate", "--app", created.appId)).json[0]!;
    const mint = async (secretKey: string) => {
      const res = await server.fetch("/api/v1/sessions", {
        method: "POST",
        headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json" },
        body: JSON.stringify({ appUserId: "tess" }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { token: string }).token;
    };
    const connection = async (token: string) => {
      const res = await server.fetch("/api/v1/connections", { headers: { authorization: `Bearer ${token}` } });
      return { status: res.status, body: (await res.json()) as { error?: { message: string } } };
    };
    const byOld = await mint(created.secretKey);
    const byNew = await mint(rotated.secretKey);
    expect((await connection(byOld)).status).toBe(200);
    expect((await connection(byNew)).status).toBe(200);

    expect((await runCli(db.databaseUrl, "key", "revoke", "--app", created.appId, "--key", created.keyId)).code).toBe(0);
    expect(await connection(byOld)).toEqual({ status: 401, body: { error: { code: "auth", message: "invalid session token" } } as never });
    expect((await connection(byNew)).status).toBe(200);
  });
});

describe("grant limits", () => {
  test("--grant-daily-ceiling-usd: set at creation, shown by list, changed and reset by update; the server's consent page follows", async () => {
    const created = await runCli(db.databaseUrl, "app", "create", "--name", "ceiling app", "--origin", "https://c.example", "--grant-daily-ceiling-usd", "0.5");
    expect(created.code).toBe(0);
    const { appId } = created.json[0]!;
    expect(created.json[0]).toMatchObject({ appId, grantDailyCeilingUsd: 0.5 });
    expect(created.json[0]).not.toHaveProperty("maxGrantUsd"); // not set: app create shows only what is
    const listed = () => runCli(db.databaseUrl, "app", "list").then((r) => r.json.find((a) => a.appId === appId)!);
    expect(await listed()).toMatchObject({ maxGrantUsd: null, grantDailyCeilingUsd: 0.5 });

    // A running server refuses a $1 grant for this app at once, and offers it once the ceiling is raised.
    const consent = () => server.fetch(`/api/v1/grants/consent?${new URLSearchParams({ appId, usd: "1", origin: "https://c.example" })}`);
    expect((await consent()).status).toBe(402);
    const raised = await runCli(db.databaseUrl, "app", "update", "--app", appId, "--grant-daily-ceiling-usd", "20", "--max-grant-usd", "1");
    expect(raised.json[0]).toEqual({
      appId,
      name: "ceiling app",
      origins: ["https://c.example"],
      maxGrantUsd: 1,
      grantDailyCeilingUsd: 20,
      fundingSources: ["app"],
    });
    expect((await consent()).status).toBe(200);

    const reset = await runCli(db.databaseUrl, "app", "update", "--app", appId, "--grant-daily-ceiling-usd", "default");
    expect(reset.json[0]).toMatchObject({ maxGrantUsd: 1, grantDailyCeilingUsd: null });
    expect(await listed()).toMatchObject({ maxGrantUsd: 1, grantDailyCeilingUsd: null });
    for (const bad of ["0", "-1", "lots"]) {
      const refused = await runCli(db.databaseUrl, "app", "update", "--app", appId, `--grant-daily-ceiling-usd=${bad}`);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain("--grant-daily-ceiling-usd must be a number > 0 (or `default`)");
    }
    // Below one nano-dollar it would be stored as 0, which turns the app's grants off.
    const tooSmall = await runCli(db.databaseUrl, "app", "update", "--app", appId, "--max-grant-usd", "0.0000000001");
    expect(tooSmall.code).toBe(2);
    expect(tooSmall.stderr).toContain("--max-grant-usd must be at least 0.000000001");
    expect(await listed()).toMatchObject({ maxGrantUsd: 1 });
  });
});

describe("connections, grants and usage", () => {
  test("list, show and revoke a connection; list and revoke a grant; export usage as JSON lines and CSV", async () => {
    const created = (await runCli(db.databaseUrl, "app", "create", "--name", "data app", "--origin", "https://g.example")).json[0]!;
    const { appId, secretKey } = created as { appId: string; secretKey: string };
    await connectOverHttp(server, secretKey, "carol", 5);
    await connectOverHttp(server, secretKey, 'dave, "the" tester', 2);
    const chat = await server.fetch("/api/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json", "x-service-user": "carol" },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi [[mock tokens=3]]" }], max_tokens: 8 }),
    });
    const requestId = chat.headers.get("x-request-id")!;
    expect(chat.status).toBe(200);

    const listed = await runCli(db.databaseUrl, "connections", "list", "--app", appId);
    expect(listed.json.map((c) => [c.appUserId, c.monthlyUsd, c.revokedAt])).toEqual([
      ["carol", 5, null],
      ['dave, "the" tester', 2, null],
    ]);
    const shown = await pollUntil("carol's usage recorded", async () => {
      const r = (await runCli(db.databaseUrl, "connections", "show", "--app", appId, "--user", "carol")).json[0]!;
      return r.usedUsd > 0 ? r : undefined;
    });
    expect(shown).toMatchObject({ appUserId: "carol", monthlyUsd: 5, fundingStatus: "ok" });

    const day = new Date().toISOString().slice(0, 10);
    const jsonl = await runCli(db.databaseUrl, "usage", "export", "--app", appId, "--from", day, "--to", day);
    expect(jsonl.json).toHaveLength(1);
    expect(jsonl.json[0]).toMatchObject({ requestId, appUserId: "carol", model: "openai/gpt-4o-mini", status: "ok", costUsd: shown.usedUsd });
    const csv = await runCli(db.databaseUrl, "usage", "export", "--app", appId, "--from", day, "--to", day, "--format", "csv");
    const [header, line] = csv.stdout.trim().split("\n");
    expect(header).toBe(
      "requestId,startedAt,appUserId,grantId,model,generationId,promptTokens,completionTokens,costUsd,source,status,streamed,reservedUsd,overrunUsd",
    );
    expect(line!.startsWith(`${requestId},`)).toBe(true);
    expect((await runCli(db.databaseUrl, "usage", "export", "--app", appId, "--from", "2020-01-01", "--to", "2020-01-31")).stdout).toBe("");
    expect((await runCli(db.databaseUrl, "usage", "export", "--app", appId, "--from", "yesterday", "--to", day)).code).toBe(2);
    // A day that does not exist is refused, not rolled over into the next month.
    const impossible = await runCli(db.databaseUrl, "usage", "export", "--app", appId, "--from", "2026-02-01", "--to", "2026-02-31");
    expect(impossible.code).toBe(2);
    expect(impossible.stderr).toContain("--to must be a date like 2026-11-01");

    expect((await runCli(db.databaseUrl, "connections", "revoke", "--app", appId, "--user", "carol")).code).toBe(0);
    const refused = await server.fetch("/api/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json", "x-service-user": "carol" },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 8 }),
    });
    expect(refused.status).toBe(402);
    expect((await runCli(db.databaseUrl, "connections", "revoke", "--app", appId, "--user", "carol")).code).toBe(1);

    // A grant, made the way the consent page makes one.
    const store = openSqliteStore(db.path);
    const token = await store.grants.createConsentRequest(
      { appId, usdCapNano: 1e9, maxUses: 3, ttlSeconds: 3600, origin: "https://g.example", state: "" },
      Date.now(),
      60_000,
    );
    const grant = await approveConsentOrThrow(store.grants, token, Date.now());
    await store.close();
    const grants = await runCli(db.databaseUrl, "grants", "list", "--app", appId);
    expect(grants.json).toEqual([expect.objectContaining({ grantId: grant.grant.id, usd: 1, uses: 0, maxUses: 3, revokedAt: null })]);
    expect(grants.stdout).not.toContain(grant.grantToken);
    expect((await runCli(db.databaseUrl, "grants", "revoke", "--app", appId, "--grant", grant.grant.id)).code).toBe(0);
    expect((await runCli(db.databaseUrl, "grants", "revoke", "--app", "appother", "--grant", grant.grant.id)).code).toBe(1);
    const status = await server.fetch("/api/v1/grants/current", { headers: { authorization: `Bearer ${secretKey}`, "x-service-grant": grant.grantToken } });
    expect(((await status.json()) as { status: string }).status).toBe("revoked");
  });
});

describe("a store that is not there", () => {
  /** `bun src/cli.ts …` from `cwd`, with no DATABASE_URL: the default, data/proxy.sqlite under `cwd`. */
  async function cliIn(cwd: string, ...args: string[]) {
    const proc = Bun.spawn([process.execPath, join(REPO_ROOT, "src/cli.ts"), ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  }

  test("read from another folder, it is refused with where it was looked for, and nothing is created", async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), "cli-elsewhere-"));
    try {
      for (const args of [
        ["app", "list"],
        ["app", "show", "--app", "appx"],
        ["key", "list", "--app", "appx"],
        ["keys", "rotate-kek"],
      ]) {
        const run = await cliIn(elsewhere, ...args);
        expect({ args, code: run.code, stdout: run.stdout }).toEqual({ args, code: 2, stdout: "" });
        expect(run.stderr.trim()).toBe(
          `no store at ${join(elsewhere, "data/proxy.sqlite")} (DATABASE_URL sqlite:data/proxy.sqlite, relative to the working folder ${elsewhere}): nothing was created. ` +
            "Run the command from the folder the service runs in, or set DATABASE_URL to the service's database (an absolute path works from any folder).",
        );
      }
      expect(readdirSync(elsewhere)).toEqual([]);
      // An absolute DATABASE_URL to a missing file: the same refusal, without the working folder.
      const absolute = await runCli(`sqlite:${join(elsewhere, "nowhere", "proxy.sqlite")}`, "app", "list");
      expect(absolute.code).toBe(2);
      expect(absolute.stderr).toStartWith(
        `no store at ${join(elsewhere, "nowhere", "proxy.sqlite")} (DATABASE_URL sqlite:${join(elsewhere, "nowhere", "proxy.sqlite")}): `,
      );
      expect(existsSync(join(elsewhere, "nowhere"))).toBe(false);
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  test("app create makes it and says where; the next command there sees the app", async () => {
    const fresh = mkdtempSync(join(tmpdir(), "cli-fresh-"));
    try {
      const created = await cliIn(fresh, "app", "create", "--name", "first");
      expect(created.code).toBe(0);
      const app = JSON.parse(created.stdout) as { appId: string };
      expect(created.stderr.trim()).toBe(
        `created a new store at ${join(fresh, "data/proxy.sqlite")} (DATABASE_URL sqlite:data/proxy.sqlite, relative to the working folder ${fresh}); ` +
          "the service must use the same DATABASE_URL to see this app.",
      );
      const listed = await cliIn(fresh, "app", "list");
      expect({ code: listed.code, stderr: listed.stderr }).toEqual({ code: 0, stderr: "" });
      expect(JSON.parse(listed.stdout)).toMatchObject({ appId: app.appId, name: "first" });
      // Once it exists, app create says nothing more about it.
      expect((await cliIn(fresh, "app", "create", "--name", "second")).stderr).toBe("");
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});
