/** The operator commands on apps and keys; the ones on users, grants and usage are in data-commands.ts. */
import { DATA_COMMANDS } from "./data-commands";
import { WEBHOOK_COMMANDS } from "./webhook-commands";
import { SECRETS_COMMANDS } from "./secrets-commands";
import { APP, print, text, type Command, type Values } from "./shared";
import { loadConfig } from "../config";
import { nanoToUsd } from "../money";

export { UsageError, type Command } from "./shared";

/** `default` is null (the service default); anything else goes to the service as a number, NaN included, for it to judge. */
function usdOrDefault(values: Values, name: string): number | null | undefined {
  const raw = text(values, name, false);
  if (raw === undefined) return undefined;
  return raw === "default" ? null : Number(raw);
}

const grantLimits = (values: Values) => ({
  maxGrantUsd: usdOrDefault(values, "max-grant-usd"),
  grantDailyCeilingUsd: usdOrDefault(values, "grant-daily-ceiling-usd"),
});

const origins = (values: Values) => values.origin as string[] | undefined;

/** `app,user`: the service judges the words (an empty item is kept, to be refused by name). */
const fundingSources = (values: Values) =>
  text(values, "funding-sources", false)
    ?.split(",")
    .map((source) => source.trim());

/** What `app create` and `app update` set beside the name and origins. */
const appSettings = (values: Values) => ({ ...grantLimits(values), fundingSources: fundingSources(values) });

const APP_FIELDS = {
  name: { type: "string" },
  origin: { type: "string", multiple: true },
  "max-grant-usd": { type: "string" },
  "grant-daily-ceiling-usd": { type: "string" },
  "funding-sources": { type: "string" },
} as const;

/** The service's own defaults (an empty environment), which an app's limits fall back to. */
const SERVICE_DEFAULTS = loadConfig({});

/** A grant limit left out (app create) or set to `default` (app update): the service's own. */
const SERVICE_MAX_GRANT = `the service's DEFAULT_MAX_GRANT_USD (${SERVICE_DEFAULTS.defaultMaxGrantUsd} unless set)`;
const SERVICE_DAILY_CEILING = `the service's GRANT_DAILY_CEILING_USD (${nanoToUsd(SERVICE_DEFAULTS.grantDailyCeilingNano)} unless set)`;

const FUNDING_SOURCES_DEFAULT = "app: the operator's upstream key pays every call (user: a user may pay with their own upstream account)";

const APP_COMMANDS: Command[] = [
  {
    name: "app create",
    usage: "--name NAME [--origin ORIGIN]... [--max-grant-usd USD] [--grant-daily-ceiling-usd USD] [--funding-sources app,user]",
    summary: "create an app; prints its secret key, once",
    defaults: {
      "--origin": "none: no web page may call the API with the app's session tokens (CORS), nor open its connect page or consent popup",
      "--max-grant-usd": SERVICE_MAX_GRANT,
      "--grant-daily-ceiling-usd": SERVICE_DAILY_CEILING,
      "--funding-sources": FUNDING_SOURCES_DEFAULT,
    },
    options: APP_FIELDS,
    createsStore: true,
    async run(operator, values) {
      print(await operator.apps.create({ name: text(values, "name")!, origins: origins(values), ...appSettings(values) }));
    },
  },
  {
    name: "app list",
    usage: "",
    summary: "one JSON line per app, with its grant limits (null: the service default), funding sources and key ids (no secrets)",
    options: {},
    async run(operator) {
      for (const app of await operator.apps.list()) print(app);
    },
  },
  {
    name: "app show",
    usage: "--app APP_ID",
    summary: "one app, with its grant limits, funding sources and key ids (no secrets)",
    options: APP,
    async run(operator, values) {
      print(await operator.apps.show(text(values, "app")!));
    },
  },
  {
    name: "app update",
    usage: "--app APP_ID [--name NAME] [--origin ORIGIN]... [--max-grant-usd USD|default] [--grant-daily-ceiling-usd USD|default] [--funding-sources app,user]",
    summary: "change an app's name, origins (the list given replaces the old one), largest grant, daily grant ceiling or funding sources",
    defaults: {
      "a flag left out": "keeps its value",
      "--max-grant-usd default": SERVICE_MAX_GRANT,
      "--grant-daily-ceiling-usd default": SERVICE_DAILY_CEILING,
    },
    options: { ...APP, ...APP_FIELDS },
    async run(operator, values) {
      const changes = { name: text(values, "name", false), origins: origins(values), ...appSettings(values) };
      print(await operator.apps.update(text(values, "app")!, changes));
    },
  },
  {
    name: "app disable",
    usage: "--app APP_ID",
    summary: "refuse the app's keys and sessions on every instance (its data is kept)",
    options: APP,
    async run(operator, values) {
      print(await operator.apps.disable(text(values, "app")!));
    },
  },
  {
    name: "app enable",
    usage: "--app APP_ID",
    summary: "accept a disabled app's keys and sessions again",
    options: APP,
    async run(operator, values) {
      print(await operator.apps.enable(text(values, "app")!));
    },
  },
  {
    name: "key list",
    usage: "--app APP_ID",
    summary: "one JSON line per key of the app (ids and dates, no secrets)",
    options: APP,
    async run(operator, values) {
      for (const key of await operator.keys.list(text(values, "app")!)) print(key);
    },
  },
  {
    name: "key rotate",
    usage: "--app APP_ID",
    summary: "issue a new key; older keys stay valid until revoked",
    options: APP,
    async run(operator, values) {
      print(await operator.keys.rotate(text(values, "app")!));
    },
  },
  {
    name: "key revoke",
    usage: "--app APP_ID --key KEY_ID",
    summary: "revoke one key, on every instance at once",
    options: { ...APP, key: { type: "string" } },
    async run(operator, values) {
      print(await operator.keys.revoke(text(values, "app")!, text(values, "key")!));
    },
  },
];

export const COMMANDS: Command[] = [...APP_COMMANDS, ...DATA_COMMANDS, ...WEBHOOK_COMMANDS, ...SECRETS_COMMANDS];
