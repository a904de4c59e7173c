/**
 * Where the key that seals the store's secrets comes from. The server and the operator CLI
 * both call resolveSecretBox with the same Config, so for one DATABASE_URL they get the same
 * key:
 * 1. SECRETS_KEY, else the file SECRETS_KEY_FILE names;
 * 2. a SQLite file: `secrets.key` beside it, generated on first use. Kept out of the
 *    database file, so a copy of the database alone opens nothing; back it up with it;
 * 3. `sqlite::memory:`: a random key for this process (the store dies with it);
 * 4. PostgreSQL outside production (production requires SECRETS_KEY, src/config.ts):
 *    `data/secrets.key` under the working folder, with a warning, since every instance
 *    must hold the same key.
 * Whichever it is, SECRETS_KEY_PREVIOUS adds the keys it replaced to the ring: they open
 * what they sealed, and `keys rotate-kek` re-seals that under the current key.
 */
import { closeSync, fsyncSync, linkSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import { ConfigError, SECRETS_KEY_FORM, SECRETS_KEY_RULE, type Config } from "../config";
import { randomString } from "../random";
import { ensurePrivateFolder, tightenFile } from "./private-files";
import { KEY_BYTES, SecretBox, secretsKey, type SecretsKey } from "./secret-box";

export const KEY_FILE_NAME = "secrets.key";

/**
 * The key ring for `config`'s store. `warn` hears what an operator must act on: PostgreSQL
 * without SECRETS_KEY, and (through the box, once) a store re-sealed under a key this ring lacks.
 */
export function resolveSecretBox(config: Config, warn: (message: string) => void): SecretBox {
  const previous = config.previousSecretsKeys.map((key, i) => parseSecretsKey(key, `SECRETS_KEY_PREVIOUS (key ${i + 1})`));
  if (config.secretsKey) return new SecretBox(parseSecretsKey(config.secretsKey, "SECRETS_KEY"), previous, "SECRETS_KEY", warn);
  if (config.secretsKeyFile) {
    const path = resolve(config.secretsKeyFile);
    return new SecretBox(readKeyFile(path, `SECRETS_KEY_FILE (${path})`), previous, `SECRETS_KEY_FILE (${path})`, warn);
  }
  const { database } = config;
  if (database.engine === "sqlite" && database.path === ":memory:") return SecretBox.random();
  const folder = database.engine === "sqlite" ? dirname(resolve(database.path)) : resolve("data");
  if (database.engine === "postgres") {
    warn(
      `SECRETS_KEY is not set: the secrets kept in PostgreSQL are sealed with the key file ${join(folder, KEY_FILE_NAME)} of this machine. ` +
        "Every instance on this database needs the same key: set the same SECRETS_KEY on all of them (NODE_ENV=production requires it).",
    );
  }
  const path = join(folder, KEY_FILE_NAME);
  return new SecretBox(loadOrCreateKeyFile(path, database.engine === "sqlite" ? [database.path] : []), previous, `the key file ${path}`, warn);
}

/** A key in its written form; a bad one is a configuration error that names where it came from, never its value. */
export function parseSecretsKey(text: string, name: string): SecretsKey {
  if (!SECRETS_KEY_FORM.test(text)) throw new ConfigError([`${name}: ${SECRETS_KEY_RULE}`]);
  return secretsKey(Buffer.from(text, "base64"));
}

/**
 * The key file at `path`, created on first use: 0600 in a 0700 folder, written to a private
 * temporary file and hard-linked into place. link() fails when the name exists, so two
 * processes starting together on a new store cannot both create it: the second reads the
 * first's, complete (a linked file is already written, unlike one opened with O_EXCL).
 */
function loadOrCreateKeyFile(path: string, databases: string[]): SecretsKey {
  let text: string;
  try {
    ensurePrivateFolder(dirname(path), databases);
    const existing = readIfExists(path);
    if (existing === null) createKeyFile(path);
    else tightenFile(path);
    text = existing ?? readFileSync(path, "utf8");
  } catch (err) {
    // Say what to set instead, e.g. for a read-only volume; a plain message, not a stack.
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError([`SECRETS_KEY: unset, and the key file ${path} cannot be read or created (${code}); set SECRETS_KEY or SECRETS_KEY_FILE`]);
  }
  return parseSecretsKey(text.trim(), `the key file ${path}`);
}

function createKeyFile(path: string): void {
  const draft = `${path}.${randomString(12)}.tmp`;
  const fd = openSync(draft, "wx", 0o600);
  try {
    writeSync(fd, `${randomBytes(KEY_BYTES).toString("base64")}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(draft, path);
  } catch (err) {
    // Another process linked its key first: it is the one, complete.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    unlinkSync(draft);
  }
}

function readKeyFile(path: string, name: string): SecretsKey {
  let text: string | null;
  try {
    text = readIfExists(path);
  } catch (err) {
    throw new ConfigError([`${name}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`]);
  }
  if (text === null) throw new ConfigError([`${name}: no such file`]);
  // Trimmed: `openssl rand -base64 32 > file` ends the key with a newline.
  return parseSecretsKey(text.trim(), name);
}

function readIfExists(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}
