/**
 * Where the secrets key comes from (src/secrets/secrets-key.ts), as the server and the CLI
 * resolve it from the same Config: SECRETS_KEY, SECRETS_KEY_FILE, or a key file beside the
 * SQLite database created once (0600, and the same key for processes racing to create it).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../../src/config";
import { resolveSecretBox } from "../../src/secrets/secrets-key";
import { SecretBox, secretsKey } from "../../src/secrets/secret-box";
import { REPO_ROOT } from "../helpers/server";

const folders: string[] = [];
afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});
function tempDir(): string {
  const folder = mkdtempSync(join(tmpdir(), "proxy-key-"));
  folders.push(folder);
  return folder;
}

const newKey = () => randomBytes(32).toString("base64");
const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);
const configError = (env: Record<string, string>): string => {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error("no configuration error");
};
const noWarning = (message: string) => {
  throw new Error(`unexpected warning: ${message}`);
};

describe("the secrets key", () => {
  test("SECRETS_KEY is the base64 of 32 bytes; anything else is a configuration error that names it, never echoes it", () => {
    const key = newKey();
    const box = resolveSecretBox(loadConfig({ SECRETS_KEY: key }), noWarning);
    expect(box.current.id).toBe(secretsKey(Buffer.from(key, "base64")).id);
    for (const bad of ["c2VjcmV0", randomBytes(31).toString("base64"), randomBytes(33).toString("base64"), "correct horse battery staple, long enough"]) {
      const message = configError({ SECRETS_KEY: bad });
      expect(message).toContain("SECRETS_KEY: must be the base64 of 32 random bytes");
      expect(message).not.toContain(bad);
    }
    expect(configError({ SECRETS_KEY: key, SECRETS_KEY_FILE: "/x" })).toContain("SECRETS_KEY_FILE: set SECRETS_KEY or SECRETS_KEY_FILE, not both");
  });

  test("SECRETS_KEY_PREVIOUS: old keys that open what they sealed and never seal; a bad one is named by its place, never echoed", () => {
    const [current, old, older] = [newKey(), newKey(), newKey()];
    const idOf = (key: string) => secretsKey(Buffer.from(key, "base64")).id;
    const oldBox = resolveSecretBox(loadConfig({ SECRETS_KEY: old }), noWarning);
    const sealed = oldBox.seal("a webhook secret", "webhook_endpoint/x");
    const keyFile = join(tempDir(), "key");
    writeFileSync(keyFile, `${current}\n`);
    for (const env of [{ SECRETS_KEY: current }, { SECRETS_KEY_FILE: keyFile }]) {
      const ring = resolveSecretBox(loadConfig({ ...env, SECRETS_KEY_PREVIOUS: ` ${older} ,${old}` }), noWarning);
      expect(ring.current.id).toBe(idOf(current));
      expect(ring.open(sealed, "webhook_endpoint/x")).toBe("a webhook secret");
      expect(ring.needsResealing(sealed)).toBe(true);
      expect(SecretBox.keyIdOf(ring.seal("new", "webhook_endpoint/x"))).toBe(idOf(current));
    }
    const message = configError({ SECRETS_KEY: current, SECRETS_KEY_PREVIOUS: `${old},not-a-key` });
    expect(message).toContain("SECRETS_KEY_PREVIOUS: key 2 must be the base64 of 32 random bytes");
    expect(message).not.toContain(old);
    expect(message).not.toContain("not-a-key");
  });

  test("PostgreSQL in production requires it; outside production it falls back to data/secrets.key, with a warning", async () => {
    const pgProduction = { NODE_ENV: "production", UPSTREAM_API_KEY: "k", DATABASE_URL: "postgres://u@h/db" };
    expect(configError(pgProduction)).toContain("SECRETS_KEY: required when NODE_ENV=production with PostgreSQL");
    expect(() => loadConfig({ ...pgProduction, SECRETS_KEY: newKey() })).not.toThrow();
    expect(() => loadConfig({ ...pgProduction, DATABASE_URL: "sqlite:data/x.sqlite" })).not.toThrow();

    // In a child process whose working folder is a temp dir: the fallback writes under it.
    const cwd = tempDir();
    const script = `import { loadConfig } from "${REPO_ROOT}/src/config";
      import { resolveSecretBox } from "${REPO_ROOT}/src/secrets/secrets-key";
      const warnings = [];
      const box = resolveSecretBox(loadConfig({ DATABASE_URL: "postgres://u@h/db" }), (m) => warnings.push(m));
      console.log(JSON.stringify({ id: box.current.id, warnings }));`;
    const child = Bun.spawnSync([process.execPath, "-e", script], { cwd, env: { PATH: process.env.PATH ?? "" } });
    const { id, warnings } = JSON.parse(child.stdout.toString()) as { id: string; warnings: string[] };
    expect(warnings).toEqual([expect.stringContaining("Every instance on this database needs the same key: set the same SECRETS_KEY")]);
    expect(id).toBe(secretsKey(Buffer.from(readFileSync(join(cwd, "data", "secrets.key"), "utf8").trim(), "base64")).id);
  });

  test("SECRETS_KEY_FILE: the key in a file (a trailing newline is fine); a missing or bad file is named", () => {
    const folder = tempDir();
    const key = newKey();
    writeFileSync(join(folder, "key"), `${key}\n`);
    expect(resolveSecretBox(loadConfig({ SECRETS_KEY_FILE: join(folder, "key") }), noWarning).current.id).toBe(secretsKey(Buffer.from(key, "base64")).id);
    expect(() => resolveSecretBox(loadConfig({ SECRETS_KEY_FILE: join(folder, "missing") }), noWarning)).toThrow(
      /SECRETS_KEY_FILE \(.*missing\): no such file/,
    );
    writeFileSync(join(folder, "bad"), "not a key\n");
    expect(() => resolveSecretBox(loadConfig({ SECRETS_KEY_FILE: join(folder, "bad") }), noWarning)).toThrow(/SECRETS_KEY_FILE \(.*bad\): must be the base64/);
  });

  test("sqlite::memory:: a random key for the process, nothing written", () => {
    const config = loadConfig({ DATABASE_URL: "sqlite::memory:" });
    expect(resolveSecretBox(config, noWarning).current.id).not.toBe(resolveSecretBox(config, noWarning).current.id);
  });

  test("a SQLite file: secrets.key beside it, created once, 0600 in a 0700 folder; the same key on every later start", () => {
    const folder = join(tempDir(), "data");
    const config = loadConfig({ DATABASE_URL: `sqlite:${join(folder, "proxy.sqlite")}` });
    const first = resolveSecretBox(config, noWarning);
    expect(readdirSync(folder)).toEqual(["secrets.key"]);
    expect([modeOf(folder), modeOf(join(folder, "secrets.key"))]).toEqual(["700", "600"]);
    expect(resolveSecretBox(config, noWarning).current.id).toBe(first.current.id);
    expect(first.source).toBe(`the key file ${join(folder, "secrets.key")}`);
  });

  test("a key file that cannot be read or created is a configuration error naming SECRETS_KEY and the path", () => {
    const folder = join(tempDir(), "data");
    mkdirSync(join(folder, "secrets.key"), { recursive: true }); // a folder where the file should be
    const config = loadConfig({ DATABASE_URL: `sqlite:${join(folder, "proxy.sqlite")}` });
    expect(() => resolveSecretBox(config, noWarning)).toThrow(ConfigError);
    expect(() => resolveSecretBox(config, noWarning)).toThrow(/SECRETS_KEY: unset, and the key file .*secrets\.key cannot be read or created \(EISDIR\)/);
  });

  test("processes creating the key file at the same moment all end up with the one key", async () => {
    const folder = join(tempDir(), "data");
    const script = `import { loadConfig } from "${REPO_ROOT}/src/config";
      import { resolveSecretBox } from "${REPO_ROOT}/src/secrets/secrets-key";
      const config = loadConfig({ DATABASE_URL: "sqlite:${join(folder, "proxy.sqlite")}" });
      await Bun.sleep(Number(process.env.START_AT) - Date.now());
      console.log(resolveSecretBox(config, () => {}).current.id);`;
    const startAt = String(Date.now() + 1500);
    const children = Array.from({ length: 6 }, () =>
      Bun.spawn([process.execPath, "-e", script], { env: { PATH: process.env.PATH ?? "", START_AT: startAt }, stdout: "pipe", stderr: "pipe" }),
    );
    const ids = await Promise.all(children.map(async (child) => (await new Response(child.stdout).text()).trim()));
    expect(ids.every((id) => id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(1);
    expect(readdirSync(folder)).toEqual(["secrets.key"]);
    expect(ids[0]).toBe(secretsKey(Buffer.from(readFileSync(join(folder, "secrets.key"), "utf8").trim(), "base64")).id);
  });
});
