/**
 * GET /key (spec: paths./key, "Get current API key"): the key in the Authorization header,
 * its limit, what the limit leaves and what the key spent, all time and in the current UTC
 * day, week and month (./key-usage.ts). 401 for a key the mock refuses (./bearer.ts).
 *
 * What the mock does not model is answered as the spec's types allow: no BYOK (usage 0, not
 * in the limit), never a free-tier, management or provisioning key, and the deprecated
 * `rate_limit` with the -1 the spec says it always holds.
 */
import { authenticate } from "./bearer";
import { jsonError, jsonOk } from "./errors";
import type { KeyBook, MockKeyAccount } from "./keys";

export function handleKeyLookup(request: Request, keys: KeyBook, now: number): Response {
  const caller = authenticate(request, keys, now);
  if (!("account" in caller)) return jsonError(401, caller.message);
  return jsonOk({ data: keyData(caller.account, now) });
}

/** Every field the spec requires, in its order. */
function keyData(account: MockKeyAccount, now: number) {
  const { usage } = account;
  return {
    label: account.label,
    limit: account.limitUsd,
    usage: usage.total,
    usage_daily: usage.in("daily", now),
    usage_weekly: usage.in("weekly", now),
    usage_monthly: usage.in("monthly", now),
    byok_usage: 0,
    byok_usage_daily: 0,
    byok_usage_weekly: 0,
    byok_usage_monthly: 0,
    is_free_tier: false,
    is_management_key: false,
    is_provisioning_key: false,
    limit_remaining: usage.remaining(account.limitUsd, account.usageLimitType, now),
    limit_reset: account.usageLimitType,
    include_byok_in_limit: false,
    creator_user_id: account.userId,
    rate_limit: { requests: -1, interval: "10s", note: "This field is deprecated and safe to ignore." },
    expires_at: account.expiresAt === null ? null : new Date(account.expiresAt).toISOString(),
  };
}
