import { existsSync, mkdirSync, openSync, writeSync, closeSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Deps } from "./deps";
import { createAppWithKey } from "./services/operator/secret-keys";

/**
 * Production, an empty store, and a default app's key file already there (an earlier store's,
 * whose database was removed and the file not). Refused before the app is created: its key
 * could not be written, and the app would be left with a key nobody has.
 */
export class DefaultKeyFileExistsError extends Error {
  constructor(readonly path: string) {
    super(
      `the default app's key file ${path} already exists, from an earlier store, and this store is empty. ` +
        "Move the file away (keep it if that store's app still matters), or set DEFAULT_APP_KEY_FILE to another path.",
    );
    this.name = "DefaultKeyFileExistsError";
  }
}

/**
 * First start with an empty store: create a default app so a newcomer can call the API
 * straight away. Its secret key is never logged through the logger (log shippers must not
 * receive it). In development it is printed to the terminal, once. In production, where
 * stdout usually goes to a log collector, it is written to a file only the service's user
 * can read (mode 0600, never overwritten), and only that file's path is printed.
 * `cliCommand` starts an operator command the way this process was started
 * (src/launch/invocation.ts): `npm run cli --` in a checkout, `./metered-proxy cli` for the
 * single binary, whose user has neither the checkout nor npm.
 */
export async function ensureDefaultApp(deps: Deps, print: (line: string) => void, cliCommand: string): Promise<void> {
  if ((await deps.store.apps.count()) > 0) return;
  const keyFile = deps.config.env === "production" ? defaultKeyFile(deps) : null;
  if (keyFile !== null && existsSync(keyFile)) throw new DefaultKeyFileExistsError(keyFile);
  // Instances starting together on one empty database: only the first creates the app.
  if (!(await deps.store.settings.claim("default_app_created_at", String(deps.clock.now())))) return;
  const { app, key } = await createAppWithKey(deps.store.apps, "default", [], deps.clock.now());
  print("");
  if (keyFile !== null) {
    writePrivateFile(keyFile, JSON.stringify({ appId: app.id, keyId: key.keyId, secretKey: key.secretKey }) + "\n");
    print(`  Created a default app (${app.id}) on this empty store. Its secret key is in ${keyFile}`);
    print("  (readable by this user only): copy it somewhere safe, then delete the file.");
  } else {
    print("  Created a default app on this empty store. Its secret key is shown only this once:");
    print("");
    print(`    appId:     ${app.id}`);
    print(`    secretKey: ${key.secretKey}`);
  }
  print("");
  print(`  Create more with: ${cliCommand} app create --name NAME --origin https://your.site`);
  print("");
}

/** DEFAULT_APP_KEY_FILE, else beside the SQLite file, else data/ under the working folder. */
function defaultKeyFile(deps: Deps): string {
  const { config } = deps;
  if (config.defaultAppKeyFile) return resolve(config.defaultAppKeyFile);
  const folder = config.database.engine === "sqlite" && config.database.path !== ":memory:" ? dirname(config.database.path) : "data";
  return resolve(folder, "default-app-key.json");
}

function writePrivateFile(path: string, content: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  // "wx": fail rather than replace a key file left from an earlier store.
  const fd = openSync(path, "wx", 0o600);
  try {
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
}
