/**
 * What the operator service shares between its operations: the context they run in, the
 * rules on the operator's input, and the two refusals (ARCHITECTURE.md §5: services throw
 * ApiError). The CLI turns `invalid_request` into a usage error (exit 2) and `not_found`
 * into exit 1; the admin API sends them as 400 and 404.
 */
import type { Clock } from "../../clock";
import { ApiError } from "../../errors";
import { parseUtcDay } from "../../money";
import type { Store } from "../../store";
import type { App } from "../../store/apps";
import { FUNDING_SOURCES, type FundingSource } from "../../store/connections";

/**
 * How the surface calling the service names each input, so that a refusal names what the
 * operator typed: `--max-grant-usd` on the command line, `maxGrantUsd` in a JSON body.
 */
export interface InputNames {
  name: string;
  origins: string;
  maxGrantUsd: string;
  grantDailyCeilingUsd: string;
  fundingSources: string;
  url: string;
  events: string;
  /** What stands for "the service default" where a maximum grant is expected. */
  serviceDefault: string;
  from: string;
  to: string;
  format: string;
  limit: string;
  cursor: string;
}

export const JSON_INPUT_NAMES: InputNames = {
  name: "name",
  origins: "origins",
  maxGrantUsd: "maxGrantUsd",
  grantDailyCeilingUsd: "grantDailyCeilingUsd",
  fundingSources: "fundingSources",
  url: "url",
  events: "events",
  serviceDefault: "null",
  from: "from",
  to: "to",
  format: "format",
  limit: "limit",
  cursor: "cursor",
};

export interface OperatorContext {
  store: Store;
  clock: Clock;
  names: InputNames;
  /** WEBHOOK_ALLOW_PRIVATE_ADDRESSES: receivers on this machine or a private network may be registered. */
  allowPrivateWebhookAddresses: boolean;
}

export const invalid = (message: string) => new ApiError("invalid_request", message);
export const notFound = (message: string) => new ApiError("not_found", message);

/** The app, or 404: every operation on an app's keys, users, grants or usage names one. */
export async function requireApp(context: OperatorContext, appId: string): Promise<App> {
  const app = await context.store.apps.find(appId);
  if (!app) throw notFound(`no app ${appId}`);
  return app;
}

/**
 * An origin as browsers send it in `Origin` (RFC 6454 §6.1): scheme, host and port only,
 * serialised the way URL does it, since CORS and the consent popup compare it byte for byte.
 */
export function normaliseOrigin(names: InputNames, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(`${names.origins} ${raw} is not a URL origin like https://app.example.com`);
  }
  if (!/^https?:$/.test(url.protocol) || url.origin !== raw.replace(/\/$/, "")) {
    throw invalid(`${names.origins} ${raw} must be scheme://host[:port] with no path`);
  }
  return url.origin;
}

/**
 * Who may pay an app's users' calls: at least one of `app` and `user`, each once, given in
 * any order and kept in the canonical one (`app` first), so that views compare equal.
 */
export function fundingSources(names: InputNames, given: readonly string[]): FundingSource[] {
  const unknown = [...new Set(given.filter((source) => !(FUNDING_SOURCES as readonly string[]).includes(source)))];
  if (unknown.length > 0) {
    const words = unknown.map((u) => JSON.stringify(u)).join(", ");
    throw invalid(`${names.fundingSources}: ${words} ${unknown.length === 1 ? "is not a funding source" : "are not funding sources"} (app, user)`);
  }
  if (given.length === 0) throw invalid(`${names.fundingSources} must name at least one of app, user`);
  return FUNDING_SOURCES.filter((source) => given.includes(source));
}

/** Nano-dollars are integers below 2^53 (src/money.ts): this keeps a grant far inside them. */
export const MAX_GRANT_USD_CEILING = 1_000_000;

export function nonEmptyName(names: InputNames, name: string): string {
  if (name.trim() === "") throw invalid(`${names.name} must not be empty`);
  return name;
}

/** `YYYY-MM-DD` as the UTC midnight that starts it, in ms; a day that does not exist (2026-02-31) is refused. */
export function utcDay(field: string, raw: string): number {
  const ms = parseUtcDay(raw);
  if (ms === null) throw invalid(`${field} must be a date like 2026-11-01 (YYYY-MM-DD, a day that exists)`);
  return ms;
}

export const isoTime = (ms: number) => new Date(ms).toISOString();
export const isoOrNull = (ms: number | null) => (ms === null ? null : isoTime(ms));
