import type Redis from "ioredis";
import { SLIDING_WINDOW_STEP } from "./rate-limiter";

/**
 * The budget scripts that check the counters' epoch (./budget-scripts.ts), as functions of
 * one Redis library: a library's locals live as long as the server's Lua state, so the
 * server's run id is read with INFO once per state, not on every reserve (INFO per call
 * tripled the reserve's cost: ARCHITECTURE.md §7 "Redis epoch on every reserve"). A server
 * started again, from a snapshot or as a promoted replica, starts a new state, which reads
 * its own run id. The library is named by a hash of its text, so instances of two versions
 * beside one Redis each call their own; it is loaded when a call finds it missing (Redis
 * keeps libraries in its data: a restart from nothing, or FUNCTION FLUSH, drops it).
 */

/** Locals `marker` (the epoch) and `now` (ms, Redis's clock); returns `lost` when the epoch is not this server's. */
const epochStep = (lost: string) => `
  local marker = epochOf(keys[1])
  if not marker then return ${lost} end
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
`;

// keys: epoch, account, reservation, this process's held hash, the registry, this process's
// lease. args: cap, min, desired, reservation TTL, account TTL, process id.
// Returns {status, granted | spent, reserved, marker}; status -3: this process's lease is
// gone (renew it first), -2: epoch lost, -1: the account is not loaded in this epoch (b is
// Redis's time), 0: refused, 1: granted, 2: frozen (BudgetLedger.settle), 3: rate limited.
const reserveBody = (rateLimitStep: string, rateLimitResult: string) => `
  ${epochStep("{-2, 0, 0, ''}")}
  if redis.call('EXISTS', keys[6]) == 0 then return {-3, 0, 0, marker} end
  if redis.call('HGET', keys[2], 'epoch') ~= marker then return {-1, 0, now, marker} end
  if redis.call('EXISTS', keys[3]) == 1 then return redis.error_reply('ERR duplicate reservation') end
  ${rateLimitStep}
  local spent = tonumber(redis.call('HGET', keys[2], 'spent') or '0')
  local reserved = tonumber(redis.call('HGET', keys[2], 'reserved') or '0')
  local frozen = redis.call('HGET', keys[2], 'frozen')
  if frozen and tonumber(args[1]) <= tonumber(frozen) then return {2, spent, reserved, marker${rateLimitResult}} end
  local available = tonumber(args[1]) - spent - reserved
  if available < tonumber(args[2]) then return {0, spent, reserved, marker${rateLimitResult}} end
  local granted = string.format('%d', math.min(tonumber(args[3]), available))
  redis.call('HINCRBY', keys[2], 'reserved', granted)
  redis.call('HSET', keys[3], 'account', keys[2], 'amount', granted, 'cap', args[1], 'epoch', marker, 'owner', args[6])
  redis.call('PEXPIRE', keys[3], args[4])
  redis.call('PEXPIRE', keys[2], args[5])
  redis.call('HSET', keys[4], keys[3], granted .. ' ' .. args[1] .. ' ' .. marker .. ' ' .. keys[2])
  redis.call('PEXPIRE', keys[4], args[5])
  redis.call('SADD', keys[5], args[6])
  return {1, tonumber(granted), 0, marker${rateLimitResult}}
`;

// The chat rate limit folded in: checked once the account is known to be loaded (an answer
// of -1 is retried, and must not count the call twice) and before the budget (a call over
// its rate limit is refused as such, whatever its budget). keys[7]: the limit's window;
// args 7-9: limit, window (ms), member (the request id).
const rateLimitStep = `
  local rlKey, rlLimit, rlWindow, rlMember = keys[7], tonumber(args[7]), tonumber(args[8]), args[9]
  ${SLIDING_WINDOW_STEP}
  if rlAllowed == 0 then return {3, 0, 0, marker, rlRemaining, rlReset} end
`;

const SOURCE_BODY = `
-- The server's run id, read once per Lua state.
local runid = nil
-- The epoch, or nil when the key is gone or names another server (a restart, restore or failover since).
local function epochOf(key)
  runid = runid or string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
  local marker = redis.call('GET', key)
  if not marker or string.sub(marker, 1, #runid + 1) ~= runid .. ':' then return nil end
  return marker
end

register('reserve', function(keys, args)${reserveBody("", "")}end)
register('reserve_limited', function(keys, args)${reserveBody(rateLimitStep, ", rlRemaining, rlReset")}end)

-- keys: epoch, account. {1, spent, reserved}, {-1, now, marker} (not loaded in this epoch), or {-2}.
register('read', function(keys, args)
  ${epochStep("{-2, 0, ''}")}
  if redis.call('HGET', keys[2], 'epoch') ~= marker then return {-1, now, marker} end
  return {1, tonumber(redis.call('HGET', keys[2], 'spent') or '0'), tonumber(redis.call('HGET', keys[2], 'reserved') or '0')}
end)

-- keys: epoch, reservation. 1 when the hold is there, in this epoch, on an account of this
-- epoch: a rebuild since its reserve has counted it (it was journaled) or none happened.
register('confirm', function(keys, args)
  ${epochStep("0")}
  local held = redis.call('HMGET', keys[2], 'epoch', 'account')
  if held[1] ~= marker or not held[2] or redis.call('HGET', held[2], 'epoch') ~= marker then return 0 end
  return 1
end)

-- keys: epoch. args: a new uuid, the wait before rebuilds (ms). Returns the epoch: a valid
-- one (of this server) another process started meanwhile is kept.
register('new_epoch', function(keys, args)
  local current = epochOf(keys[1])
  if current then return current end
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  local marker = runid .. ':' .. args[1] .. ':' .. string.format('%d', now + tonumber(args[2]))
  redis.call('SET', keys[1], marker)
  return marker
end)
`;

const VERSION = Bun.hash(SOURCE_BODY).toString(16);
/** A function's name in this version of the library. */
export const nameOf = (fn: BudgetFunction) => `mp_budget_${fn}_${VERSION}`;
/** The library's text (exported for scripts/bench/redis-epoch.ts, which times variants of it). */
export const BUDGET_LIBRARY_SOURCE = `#!lua name=mp_budget_${VERSION}
local function register(name, fn) redis.register_function('mp_budget_' .. name .. '_${VERSION}', fn) end
${SOURCE_BODY}`;

export type BudgetFunction = "reserve" | "reserve_limited" | "read" | "confirm" | "new_epoch";

/** Calls a function of the library, loading the library first when the server does not have it. */
export async function callBudgetFunction<T>(redis: Redis, fn: BudgetFunction, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<T> {
  try {
    return (await redis.fcall(nameOf(fn), keys.length, ...keys, ...args)) as T;
  } catch (err) {
    if (!(err instanceof Error) || !err.message.includes("Function not found")) throw err;
    // REPLACE: loading races with other instances doing the same; any of them wins, with the same text.
    await redis.call("FUNCTION", "LOAD", "REPLACE", BUDGET_LIBRARY_SOURCE);
    return (await redis.fcall(nameOf(fn), keys.length, ...keys, ...args)) as T;
  }
}
