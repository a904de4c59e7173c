/**
 * Operator commands, against the same DATABASE_URL as the server:
 *   app create --name NAME [--origin ORIGIN]... [--max-grant-usd USD]
 *                                                 one JSON line with the new secret key
 *   app list                                      one JSON line per app (no secrets)
 *   key rotate --app APP_ID                       a new key; older keys stay valid
 *   key revoke --app APP_ID --key KEY_ID          revoke one key
 * Exit codes: 0 done, 1 refused (e.g. unknown app), 2 usage or configuration error.
 */
import { ConfigError, loadConfig } from "./config";
import { openStore, type Store } from "./store";
import { parseArgs, UsageError } from "./cli-args";
import { usdToNanoFloor } from "./money";

const USAGE = `usage:
  cli app create --name NAME [--origin ORIGIN]... [--max-grant-usd USD]
  cli app list
  cli key rotate --app APP_ID
  cli key revoke --app APP_ID --key KEY_ID`;

async function run(argv: string[], store: Store): Promise<number> {
  const { command, flags } = parseArgs(argv);
  const now = Date.now();
  switch (command) {
    case "app create": {
      const name = flags.single("name");
      const origins = flags.all("origin").map(normaliseOrigin);
      const maxGrant = flags.optional("max-grant-usd");
      const maxGrantUsd = maxGrant === undefined ? null : Number(maxGrant);
      if (maxGrantUsd !== null && !(Number.isFinite(maxGrantUsd) && maxGrantUsd > 0)) throw new UsageError("--max-grant-usd must be a number > 0");
      const { app, key } = await store.apps.create(name, origins, now, maxGrantUsd === null ? null : usdToNanoFloor(maxGrantUsd));
      print({ appId: app.id, secretKey: key.secretKey, name: app.name, origins: app.origins, keyId: key.keyId, ...(maxGrantUsd === null ? {} : { maxGrantUsd }) });
      return 0;
    }
    case "app list":
      for (const app of await store.apps.list()) {
        const keys = (await store.apps.keysOf(app.id)).map((k) => ({
          keyId: k.id,
          createdAt: new Date(k.createdAt).toISOString(),
          revokedAt: k.revokedAt === null ? null : new Date(k.revokedAt).toISOString(),
        }));
        print({ appId: app.id, name: app.name, origins: app.origins, createdAt: new Date(app.createdAt).toISOString(), keys });
      }
      return 0;
    case "key rotate": {
      const appId = flags.single("app");
      if (!(await store.apps.find(appId))) return refuse(`no app ${appId}`);
      const key = await store.apps.issueKey(appId, now);
      print({ appId, keyId: key.keyId, secretKey: key.secretKey });
      return 0;
    }
    case "key revoke": {
      const appId = flags.single("app");
      const keyId = flags.single("key");
      if (!(await store.apps.revokeKey(appId, keyId, now))) return refuse(`no active key ${keyId} for app ${appId}`);
      print({ appId, keyId, revoked: true });
      return 0;
    }
    default:
      throw new UsageError(`unknown command: ${command || "(none)"}`);
  }
}

function normaliseOrigin(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--origin ${raw} is not a URL origin like https://app.example.com`);
  }
  if (!/^https?:$/.test(url.protocol) || url.origin !== raw.replace(/\/$/, "")) {
    throw new UsageError(`--origin ${raw} must be scheme://host[:port] with no path`);
  }
  return url.origin;
}

function print(value: unknown): void {
  console.log(JSON.stringify(value));
}

function refuse(message: string): number {
  console.error(message);
  return 1;
}

/** Runs one operator command; also reachable as `metered-proxy cli ...` in the single binary. */
export async function runCli(argv: string[]): Promise<number> {
  try {
    const config = loadConfig(process.env);
    const store = await openStore(config.database, { poolSize: 1 });
    try {
      return await run(argv, store);
    } finally {
      await store.close();
    }
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`${err.message}\n${USAGE}`);
      return 2;
    }
    if (err instanceof ConfigError) {
      console.error(err.message);
      return 2;
    }
    throw err;
  }
}

if (import.meta.main) process.exit(await runCli(process.argv.slice(2)));
