import type Redis from "ioredis";
import { CallBatcher } from "../call-batcher";

/**
 * The settles of one process, sent to Redis together: while one batch is under way the
 * settles that come in queue, and go as one script call the moment it ends (CallBatcher).
 * One at a time a settle goes at once, alone; under load a call's settle costs a share of
 * one round trip, so a call costs about one round trip: its reserve (ARCHITECTURE.md §7
 * "Redis settles in batches").
 *
 * The script settles each in turn exactly as a lone settle would, so a batch is only a
 * way of carrying them: each is idempotent on its own, and a batch that failed (or timed
 * out after Redis ran it) is simply sent again.
 */
// KEYS: this process's held hash and settled set, the orphans hash.
// ARGV[1]: account TTL; then four per settle: reservation key, account key, actual cost,
// the account's epoch when the reservation was made. A cost above the amount reserved
// freezes the account at the reservation's cap (see BudgetLedger.settle). A missing
// reservation under the same epoch was settled already (idempotence). Under another
// epoch, Redis lost the account and it was rebuilt from the store without this in-flight
// request: its cost is added now, or it would never count against the cap. A hold made an
// orphan (this process's lease ran out while it was only slow) is settled here all the
// same, and leaves the orphans so that nobody settles it twice.
// Returns one status per settle: 1 settled, 2 counted into a rebuilt account, 0 nothing to do.
const SETTLE_MANY_LUA = `
local statuses = {}
for i = 2, #ARGV, 4 do
  local reservation, account, actual, epoch = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  redis.call('HDEL', KEYS[1], reservation)
  redis.call('HDEL', KEYS[3], reservation)
  redis.call('SADD', KEYS[2], account)
  local held = redis.call('HMGET', reservation, 'amount', 'cap')
  local amount, cap = held[1], held[2]
  local status = 0
  if amount then
    redis.call('DEL', reservation)
    if redis.call('EXISTS', account) == 1 then
      redis.call('HINCRBY', account, 'reserved', '-' .. amount)
      redis.call('HINCRBY', account, 'spent', actual)
      if cap and tonumber(actual) > tonumber(amount) then
        local frozen = tonumber(redis.call('HGET', account, 'frozen') or '0')
        redis.call('HSET', account, 'frozen', string.format('%d', math.max(frozen, tonumber(cap))))
      end
      redis.call('PEXPIRE', account, ARGV[1])
    end
    status = 1
  elseif redis.call('EXISTS', account) == 1 and redis.call('HGET', account, 'epoch') ~= epoch then
    redis.call('HINCRBY', account, 'spent', actual)
    status = 2
  end
  statuses[#statuses + 1] = status
end
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return statuses
`;

/** One settle of a hold of this process. */
export interface HeldSettle {
  reservationKey: string;
  accountKey: string;
  actualNano: number;
  /** The account's epoch when the reservation was made. */
  epoch: string;
}

/** What one script call carries at most: enough to empty a busy queue, short enough not to hold Redis up. */
const MAX_BATCH = 128;

type SettleManyCommand = (held: string, settled: string, orphans: string, accountTtlMs: number, ...entries: Array<string | number>) => Promise<number[]>;

export class SettleBatches {
  private readonly batcher: CallBatcher<HeldSettle, number>;
  /** Script calls sent so far: how many round trips the settles took. */
  batchesSent = 0;

  constructor(redis: Redis, keys: { held: string; settled: string; orphans: string }, accountTtlMs: number) {
    if (!("budgetSettleMany" in redis)) redis.defineCommand("budgetSettleMany", { numberOfKeys: 3, lua: SETTLE_MANY_LUA });
    const client = redis as unknown as { budgetSettleMany: SettleManyCommand };
    this.batcher = new CallBatcher((settles) => {
      this.batchesSent++;
      const entries: Array<string | number> = [];
      for (const s of settles) entries.push(s.reservationKey, s.accountKey, s.actualNano, s.epoch);
      return client.budgetSettleMany(keys.held, keys.settled, keys.orphans, accountTtlMs, ...entries);
    }, MAX_BATCH);
  }

  /** Resolves once Redis has applied it; rejects with its batch's error (the caller retries). */
  settle(settle: HeldSettle): Promise<number> {
    return this.batcher.call(settle);
  }
}
