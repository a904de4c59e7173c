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
// KEYS: this process's held hash, the orphans hash, the rebuilt hash. ARGV[1]: account TTL;
// then two per settle: reservation key, actual cost. A hold is settled once, in the epoch it
// belongs to: the reservation's amount leaves `reserved` and the cost joins `spent` only when
// the account is of the reservation's epoch (./budget-scripts.ts). A hold of another epoch
// was lost with Redis's data and the account rebuilt from the store since: the store counts
// the call there, as its row (written before this settle) or as a journaled hold the rebuild
// made again in the new epoch; so it only goes. What a reservation key no longer says (it
// expired) its held or orphan entry does; it leaves its owner's held hash, whoever settles
// it, so that no reclaim makes an orphan of it later. A cost above the amount reserved freezes the
// account at the reservation's cap (see BudgetLedger.settle). A hold made an orphan (this
// process's lease ran out while it was only slow) is settled here all the same, and leaves
// the orphans so that nobody settles it twice.
// Returns one status per settle: 1 settled, 0 nothing to do.
const SETTLE_MANY_LUA = `
local statuses = {}
for i = 2, #ARGV, 2 do
  local reservation, actual = ARGV[i], ARGV[i + 1]
  local amount, cap, epoch, account
  local held = redis.call('HMGET', reservation, 'amount', 'cap', 'epoch', 'account', 'owner')
  if held[1] then
    amount, cap, epoch, account = held[1], held[2], held[3], held[4]
    if held[5] then redis.call('HDEL', 'bp:held:' .. held[5], reservation) end
  else
    local entry = redis.call('HGET', KEYS[1], reservation) or redis.call('HGET', KEYS[2], reservation)
    if entry then amount, cap, epoch, account = string.match(entry, '^(%d+) (%d+) (%S+) (.+)$') end
  end
  redis.call('DEL', reservation)
  redis.call('HDEL', KEYS[1], reservation)
  redis.call('HDEL', KEYS[2], reservation)
  redis.call('HDEL', KEYS[3], reservation)
  local status = 0
  if amount and account and redis.call('HGET', account, 'epoch') == epoch then
    redis.call('HINCRBY', account, 'reserved', '-' .. amount)
    redis.call('HINCRBY', account, 'spent', actual)
    if cap and tonumber(actual) > tonumber(amount) then
      local frozen = tonumber(redis.call('HGET', account, 'frozen') or '0')
      redis.call('HSET', account, 'frozen', string.format('%d', math.max(frozen, tonumber(cap))))
    end
    redis.call('PEXPIRE', account, ARGV[1])
    status = 1
  end
  statuses[#statuses + 1] = status
end
return statuses
`;

/** One settle of a hold, of this process or (the reconciler's) of another. */
export interface HoldSettle {
  reservationKey: string;
  actualNano: number;
}

/** What one script call carries at most: enough to empty a busy queue, short enough not to hold Redis up. */
const MAX_BATCH = 128;

type SettleManyCommand = (held: string, orphans: string, rebuilt: string, accountTtlMs: number, ...entries: Array<string | number>) => Promise<number[]>;

export class SettleBatches {
  private readonly batcher: CallBatcher<HoldSettle, number>;
  /** Script calls sent so far: how many round trips the settles took. */
  batchesSent = 0;

  constructor(redis: Redis, keys: { held: string; orphans: string; rebuilt: string }, accountTtlMs: number) {
    if (!("budgetSettleMany" in redis)) redis.defineCommand("budgetSettleMany", { numberOfKeys: 3, lua: SETTLE_MANY_LUA });
    const client = redis as unknown as { budgetSettleMany: SettleManyCommand };
    this.batcher = new CallBatcher((settles) => {
      this.batchesSent++;
      const entries: Array<string | number> = [];
      for (const s of settles) entries.push(s.reservationKey, s.actualNano);
      return client.budgetSettleMany(keys.held, keys.orphans, keys.rebuilt, accountTtlMs, ...entries);
    }, MAX_BATCH);
  }

  /** Resolves once Redis has applied it; rejects with its batch's error (the caller retries). */
  settle(settle: HoldSettle): Promise<number> {
    return this.batcher.call(settle);
  }
}
