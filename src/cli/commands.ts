/** The operator commands on apps and keys; the ones on users, grants and usage are in data-commands.ts. */
import { nanoToUsd, usdToNanoFloor } from "../money";
import type { App, AppGrantLimits } from "../store/apps";
import { DATA_COMMANDS } from "./data-commands";
import { WEBHOOK_COMMANDS } from "./webhook-commands";
import { APP, iso, print, refuse, text, UsageError, type Command, type Values } from "./shared";

export { UsageError, type Command } from "./shared";

/** A `--NAME USD|default` option: undefined when absent, null for `default` (the service's), else nano-dollars. */
function usdLimit(values: Values, name: string): number | null | undefined {
  const raw = text(values, name, false);
  if (raw === undefined) return undefined;
  if (raw === "default") return null;
  const usd = Number(raw);
  if (!(Number.isFinite(usd) && usd > 0)) throw new UsageError(`--${name} must be a number > 0 (or \`default\`)`);
  return usdToNanoFloor(usd);
}

const grantLimits = (values: Values): AppGrantLimits => ({
  maxGrantNano: usdLimit(values, "max-grant-usd"),
  grantDailyCeilingNano: usdLimit(values, "grant-daily-ceiling-usd"),
});

/** The app's own grant limits in USD; null: the service default applies. */
const grantLimitsUsd = (app: App) => ({
  maxGrantUsd: app.maxGrantNano === null ? null : nanoToUsd(app.maxGrantNano),
  grantDailyCeilingUsd: app.grantDailyCeilingNano === null ? null : nanoToUsd(app.grantDailyCeilingNano),
});

/** Only the limits the app sets: `app create`'s line keeps its fixed keys otherwise (ARCHITECTURE.md §4). */
const grantLimitsSetUsd = (app: App) => Object.fromEntries(Object.entries(grantLimitsUsd(app)).filter(([, usd]) => usd !== null));

function origins(values: Values): string[] | undefined {
  const given = values.origin as string[] | undefined;
  return given?.map(normaliseOrigin);
}

export function normaliseOrigin(raw: string): string {
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


const APP_FIELDS = {
  name: { type: "string" },
  origin: { type: "string", multiple: true },
  "max-grant-usd": { type: "string" },
  "grant-daily-ceiling-usd": { type: "string" },
} as const;

const APP_COMMANDS: Command[] = [
  {
    name: "app create",
    usage: "--name NAME [--origin ORIGIN]... [--max-grant-usd USD] [--grant-daily-ceiling-usd USD]",
    summary: "create an app; prints its secret key, once",
    options: APP_FIELDS,
    async run(store, values, now) {
      const { app, key } = await store.apps.create(text(values, "name")!, origins(values) ?? [], now, grantLimits(values));
      print({ appId: app.id, secretKey: key.secretKey, name: app.name, origins: app.origins, keyId: key.keyId, ...grantLimitsSetUsd(app) });
      return 0;
    },
  },
  {
    name: "app list",
    usage: "",
    summary: "one JSON line per app, with its grant limits (null: the service default) and key ids (no secrets)",
    options: {},
    async run(store) {
      for (const app of await store.apps.list()) {
        const keys = (await store.apps.keysOf(app.id)).map((k) => ({ keyId: k.id, createdAt: iso(k.createdAt), revokedAt: iso(k.revokedAt) }));
        print({ appId: app.id, name: app.name, origins: app.origins, ...grantLimitsUsd(app), createdAt: iso(app.createdAt), disabledAt: iso(app.disabledAt), keys });
      }
      return 0;
    },
  },
  {
    name: "app update",
    usage: "--app APP_ID [--name NAME] [--origin ORIGIN]... [--max-grant-usd USD|default] [--grant-daily-ceiling-usd USD|default]",
    summary: "change an app's name, origins (the list given replaces the old one), largest grant or daily ceiling on grant dollars",
    options: { ...APP, ...APP_FIELDS },
    async run(store, values) {
      const changes = { name: text(values, "name", false), origins: origins(values), ...grantLimits(values) };
      if (Object.values(changes).every((v) => v === undefined)) {
        throw new UsageError("nothing to change: give --name, --origin, --max-grant-usd or --grant-daily-ceiling-usd");
      }
      const app = await store.apps.update(text(values, "app")!, changes);
      if (!app) return refuse(`no app ${values.app}`);
      print({ appId: app.id, name: app.name, origins: app.origins, ...grantLimitsUsd(app) });
      return 0;
    },
  },
  {
    name: "app disable",
    usage: "--app APP_ID",
    summary: "refuse the app's keys and sessions on every instance (its data is kept)",
    options: APP,
    async run(store, values, now) {
      const appId = text(values, "app")!;
      if (!(await store.apps.setDisabled(appId, now))) return refuse(`no app ${appId}`);
      print({ appId, disabled: true });
      return 0;
    },
  },
  {
    name: "app enable",
    usage: "--app APP_ID",
    summary: "accept a disabled app's keys and sessions again",
    options: APP,
    async run(store, values) {
      const appId = text(values, "app")!;
      if (!(await store.apps.setDisabled(appId, null))) return refuse(`no app ${appId}`);
      print({ appId, disabled: false });
      return 0;
    },
  },
  {
    name: "key list",
    usage: "--app APP_ID",
    summary: "one JSON line per key of the app (ids and dates, no secrets)",
    options: APP,
    async run(store, values) {
      const appId = text(values, "app")!;
      if (!(await store.apps.find(appId))) return refuse(`no app ${appId}`);
      for (const k of await store.apps.keysOf(appId)) print({ appId, keyId: k.id, createdAt: iso(k.createdAt), revokedAt: iso(k.revokedAt) });
      return 0;
    },
  },
  {
    name: "key rotate",
    usage: "--app APP_ID",
    summary: "issue a new key; older keys stay valid until revoked",
    options: APP,
    async run(store, values, now) {
      const appId = text(values, "app")!;
      if (!(await store.apps.find(appId))) return refuse(`no app ${appId}`);
      const key = await store.apps.issueKey(appId, now);
      print({ appId, keyId: key.keyId, secretKey: key.secretKey });
      return 0;
    },
  },
  {
    name: "key revoke",
    usage: "--app APP_ID --key KEY_ID",
    summary: "revoke one key, on every instance at once",
    options: { ...APP, key: { type: "string" } },
    async run(store, values, now) {
      const appId = text(values, "app")!;
      const keyId = text(values, "key")!;
      if (!(await store.apps.revokeKey(appId, keyId, now))) return refuse(`no active key ${keyId} for app ${appId}`);
      print({ appId, keyId, revoked: true });
      return 0;
    },
  },
];

export const COMMANDS: Command[] = [...APP_COMMANDS, ...DATA_COMMANDS, ...WEBHOOK_COMMANDS];
