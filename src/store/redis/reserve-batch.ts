import type Redis from "ioredis";
import { CallBatcher } from "../postgres/call-batcher";
import { SLIDING_WINDOW_STEP } from "./rate-limiter";

/**
 * The reserves of one process, sent to Redis together as the settles are
 * (./settle-batch.ts): one at a time a reserve goes at once, alone; under load the reserves
 * that came in while the last batch was under way go as one script call. Each is decided in
 * turn, exactly as it would be alone, so the batch changes no answer: it only spares each
 * call a command of its own on the client, which under load is most of what Redis costs
 * this process.
 */
// KEYS: this process's held hash, the process registry. ARGV 1-3: reservation TTL, account
// TTL, process id; then nine per reserve: account, reservation, cap, min, desired,
// the rate limit's window key ('' when none is folded in), its limit, window (ms), member.
// Returns per reserve {status, granted | spent, reserved, epoch, rlRemaining, rlReset};
// status -2: the reservation exists already, -1: not loaded, 0: refused, 1: granted,
// 2: frozen (see BudgetLedger.settle), 3: refused by the rate limit.
//
// The rate limit is checked once the account is known to be loaded (a "not loaded"
// answer is retried, and must not count the call twice) and before the budget (a call over
// its rate limit is refused as such, whatever its budget).
const RESERVE_MANY_LUA = `
local function reserve(i)
  local account, reservation, cap, min, desired = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local rlKey, rlLimit, rlWindow, rlMember = ARGV[i + 5], tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]), ARGV[i + 8]
  if redis.call('EXISTS', account) == 0 or redis.call('HEXISTS', account, 'stale') == 1 then return {-1, 0, 0, ''} end
  if redis.call('EXISTS', reservation) == 1 then return {-2, 0, 0, ''} end
  local epoch = redis.call('HGET', account, 'epoch') or ''
  local limitRemaining, limitReset = 0, 0
  if rlKey ~= '' then
${SLIDING_WINDOW_STEP}
    if rlAllowed == 0 then return {3, 0, 0, epoch, rlRemaining, rlReset} end
    limitRemaining, limitReset = rlRemaining, rlReset
  end
  local spent = tonumber(redis.call('HGET', account, 'spent') or '0')
  local reserved = tonumber(redis.call('HGET', account, 'reserved') or '0')
  local frozen = redis.call('HGET', account, 'frozen')
  if frozen and cap <= tonumber(frozen) then return {2, spent, reserved, epoch, limitRemaining, limitReset} end
  local available = cap - spent - reserved
  if available < min then return {0, spent, reserved, epoch, limitRemaining, limitReset} end
  local granted = math.min(desired, available)
  local grantedText = string.format('%d', granted)
  redis.call('HINCRBY', account, 'reserved', grantedText)
  redis.call('HSET', reservation, 'account', account, 'amount', grantedText, 'cap', ARGV[i + 2])
  redis.call('PEXPIRE', reservation, ARGV[1])
  redis.call('PEXPIRE', account, ARGV[2])
  redis.call('HSET', KEYS[1], reservation, grantedText .. ' ' .. epoch .. ' ' .. account)
  return {1, granted, 0, epoch, limitRemaining, limitReset}
end
local replies = {}
for i = 4, #ARGV, 9 do
  replies[#replies + 1] = reserve(i)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return replies
`;

/** One reserve: the keys and amounts, and the rate-limit check folded into it, if any. */
export interface ReserveRequest {
  accountKey: string;
  reservationKey: string;
  capNano: number;
  minNano: number;
  desiredNano: number;
  rateLimit?: { windowKey: string; limit: number; windowMs: number; member: string };
}

/** status, granted | spent, reserved, epoch, rate limit remaining, reset (ms). */
export type ReserveReply = [number, number, number, string, number, number];

/** What one script call carries at most (see ./settle-batch.ts). */
const MAX_BATCH = 128;

type ReserveManyCommand = (held: string, registry: string, ...args: Array<string | number>) => Promise<ReserveReply[]>;

export class ReserveBatches {
  private readonly batcher: CallBatcher<ReserveRequest, ReserveReply>;
  /** Script calls sent so far. */
  batchesSent = 0;

  constructor(
    redis: Redis,
    keys: { held: string; registry: string },
    header: { reservationTtlMs: number; accountTtlMs: number; processId: string },
  ) {
    if (!("budgetReserveMany" in redis)) redis.defineCommand("budgetReserveMany", { numberOfKeys: 2, lua: RESERVE_MANY_LUA });
    const client = redis as unknown as { budgetReserveMany: ReserveManyCommand };
    this.batcher = new CallBatcher((requests) => {
      this.batchesSent++;
      const args: Array<string | number> = [header.reservationTtlMs, header.accountTtlMs, header.processId];
      for (const r of requests) {
        const rl = r.rateLimit;
        args.push(r.accountKey, r.reservationKey, r.capNano, r.minNano, r.desiredNano);
        if (rl) args.push(rl.windowKey, rl.limit, rl.windowMs, rl.member);
        else args.push("", 0, 0, "");
      }
      return client.budgetReserveMany(keys.held, keys.registry, ...args);
    }, MAX_BATCH);
  }

  /** Rejects with its batch's error: the ledger fails closed on it. */
  reserve(request: ReserveRequest): Promise<ReserveReply> {
    return this.batcher.call(request);
  }
}
