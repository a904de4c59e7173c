import type Redis from "ioredis";
import { ApiError } from "../../errors";
import type { Logger } from "../../logger";
import type { BudgetAccount } from "../../budget/accounts";
import type { BudgetLedger, BudgetSnapshot, FoldedRateLimit, FrozenCapLoader, ReserveOutcome, SpentLoader } from "../../budget/ledger";
import { rateLimitKeyOf, SLIDING_WINDOW_STEP } from "./rate-limiter";
import { heldKeyOf, orphansKey, processesKey, ProcessLease, settledKeyOf } from "./process-lease";
import { SettleBatches } from "./settle-batch";

/**
 * The budget ledger shared by every process through Redis. Each account is a hash
 * {spent, reserved}; each reservation a hash {account, amount} with a TTL. A reserve is
 * one Lua script (with the chat rate limit folded in), and so is each batch of settles
 * (./settle-batch.ts), so they are atomic across processes: a call takes one round trip
 * and a share of a settle batch.
 *
 * An account that is not in Redis (first use, or Redis restarted and lost it) is never
 * admitted against: the reserve script answers "not loaded", the ledger loads the spend
 * from the store and retries. Budgets fail closed: Redis trouble during reserve is 503.
 * A settle that fails is retried in the background so a reservation is not left inflating
 * `reserved` after a short outage. The holds of a process that dies before settling stay
 * held as orphans until the reconciler settles them (./process-lease.ts); an account
 * it settled in is marked `stale` then, and counts as not loaded until its spend is
 * reloaded from the store.
 */
// KEYS: account, reservation, this process's held hash, the process registry.
// ARGV: cap, min, desired, reservation TTL, account TTL, process id.
// Returns {status, granted | spent, reserved, epoch}; status -1: not loaded, 0: refused,
// 1: granted, 2: frozen (see BudgetLedger.settle), 3: rate limited (the folded variant).
const reserveLua = (rateLimitStep: string, rateLimitResult: string) => `
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'stale') == 1 then return {-1, 0, 0, ''} end
if redis.call('EXISTS', KEYS[2]) == 1 then return redis.error_reply('ERR duplicate reservation') end
local epoch = redis.call('HGET', KEYS[1], 'epoch') or ''
${rateLimitStep}
local spent = tonumber(redis.call('HGET', KEYS[1], 'spent') or '0')
local reserved = tonumber(redis.call('HGET', KEYS[1], 'reserved') or '0')
local frozen = redis.call('HGET', KEYS[1], 'frozen')
if frozen and tonumber(ARGV[1]) <= tonumber(frozen) then return {2, spent, reserved, epoch${rateLimitResult}} end
local available = tonumber(ARGV[1]) - spent - reserved
if available < tonumber(ARGV[2]) then return {0, spent, reserved, epoch${rateLimitResult}} end
local granted = math.min(tonumber(ARGV[3]), available)
local grantedText = string.format('%d', granted)
redis.call('HINCRBY', KEYS[1], 'reserved', grantedText)
redis.call('HSET', KEYS[2], 'account', KEYS[1], 'amount', grantedText, 'cap', ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('HSET', KEYS[3], KEYS[2], grantedText .. ' ' .. epoch .. ' ' .. KEYS[1])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
redis.call('SADD', KEYS[4], ARGV[6])
return {1, granted, 0, epoch${rateLimitResult}}
`;

const RESERVE_LUA = reserveLua("", "");

// The same with the chat rate limit folded in, checked once the account is known to be
// loaded (a "not loaded" answer is retried, and must not count the call twice) and before
// the budget (a call over its rate limit is refused as such, whatever its budget).
// KEYS[5]: the limit's window; ARGV 7-9: limit, window (ms), member (the request id).
// Returns also rlRemaining and rlReset; status 3 is a refusal by the rate limit.
const RESERVE_WITH_RATE_LIMIT_LUA = reserveLua(
  `local rlKey, rlLimit, rlWindow, rlMember = KEYS[5], tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
${SLIDING_WINDOW_STEP}
if rlAllowed == 0 then return {3, 0, 0, epoch, rlRemaining, rlReset} end`,
  ", rlRemaining, rlReset",
);

// A stale account (see process-lease.ts) takes the store's spend but keeps its
// epoch and `reserved`: the holds of live processes in it are still counted and settle as usual.
// ARGV[4]: the cap an overrun froze the account at, per the store ('' when none).
const INIT_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'spent', ARGV[1], 'reserved', '0', 'epoch', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif redis.call('HEXISTS', KEYS[1], 'stale') == 1 then
  redis.call('HSET', KEYS[1], 'spent', ARGV[1])
  redis.call('HDEL', KEYS[1], 'stale')
else
  return 1
end
if ARGV[4] ~= '' then
  local frozen = tonumber(redis.call('HGET', KEYS[1], 'frozen') or '0')
  redis.call('HSET', KEYS[1], 'frozen', string.format('%d', math.max(frozen, tonumber(ARGV[4]))))
end
return 1
`;

// KEYS: reservation, the orphans hash. The hold of a process that died, settled by the
// reconciler once the call's row is in the store: the hold is released (under the epoch it
// was made in) and the account marked stale, so its spend is reloaded from the store, row
// included, before anything more is admitted. 0 when it is no orphan (settled already).
const SETTLE_ORPHAN_LUA = `
local entry = redis.call('HGET', KEYS[2], KEYS[1])
if not entry then return 0 end
redis.call('HDEL', KEYS[2], KEYS[1])
redis.call('DEL', KEYS[1])
local amount, epoch, account = string.match(entry, '^(%d+) (%S*) (.+)$')
if amount and redis.call('EXISTS', account) == 1 then
  if redis.call('HGET', account, 'epoch') == epoch then redis.call('HINCRBY', account, 'reserved', '-' .. amount) end
  redis.call('HSET', account, 'stale', '1')
end
return 1
`;

/**
 * Reservation keys outlive any request; the expiry only cleans the key up. A hold is freed
 * by its settle (retried while Redis is away) or, if its process died, by a reclaim.
 */
const RESERVATION_TTL_MS = 6 * 60 * 60 * 1000;
/** Account counters outlive their period; the store keeps the history. */
const ACCOUNT_TTL_MS = 40 * 24 * 60 * 60 * 1000;

/** status, granted | spent, reserved, epoch; with a folded rate limit also remaining and reset (ms). */
type ReserveReply = [number, number, number, string, number?, number?];

interface LedgerCommands {
  budgetReserve(
    account: string,
    reservation: string,
    held: string,
    registry: string,
    cap: number,
    min: number,
    desired: number,
    resvTtl: number,
    accountTtl: number,
    processId: string,
  ): Promise<ReserveReply>;
  budgetReserveWithRateLimit(
    account: string,
    reservation: string,
    held: string,
    registry: string,
    rateLimitWindow: string,
    cap: number,
    min: number,
    desired: number,
    resvTtl: number,
    accountTtl: number,
    processId: string,
    limit: number,
    windowMs: number,
    member: string,
  ): Promise<ReserveReply>;
  budgetInit(account: string, spent: number, accountTtl: number, epoch: string, frozenCap: string): Promise<number>;
  budgetSettleOrphan(reservation: string, orphans: string): Promise<number>;
}

export class RedisBudgetLedger implements BudgetLedger {
  readonly kind = "redis";
  readonly recordsRows = false;
  private readonly commands: LedgerCommands;
  private readonly retrying = new Map<string, number>();
  /** This process's open reservations: which account, under which epoch of it. */
  private readonly held = new Map<string, { accountKey: string; epoch: string }>();
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  /** This process's lease: while it is renewed, nobody reclaims this process's holds. */
  readonly lease: ProcessLease;
  /** This process's settles, sent to Redis in batches (./settle-batch.ts). */
  readonly settles: SettleBatches;

  constructor(
    private readonly redis: Redis,
    private readonly loadSpentNano: SpentLoader,
    private readonly logger: Logger,
    private readonly loadFrozenCapNano: FrozenCapLoader = async () => null,
    /** This process's instance id (its journal entries' owner). */
    instanceId: string = crypto.randomUUID(),
  ) {
    redis.defineCommand("budgetReserve", { numberOfKeys: 4, lua: RESERVE_LUA });
    redis.defineCommand("budgetReserveWithRateLimit", { numberOfKeys: 5, lua: RESERVE_WITH_RATE_LIMIT_LUA });
    redis.defineCommand("budgetInit", { numberOfKeys: 1, lua: INIT_LUA });
    redis.defineCommand("budgetSettleOrphan", { numberOfKeys: 2, lua: SETTLE_ORPHAN_LUA });
    this.commands = redis as unknown as LedgerCommands;
    this.lease = new ProcessLease(redis, logger, instanceId);
    this.settles = new SettleBatches(redis, { held: heldKeyOf(this.lease.id), settled: settledKeyOf(this.lease.id), orphans: orphansKey }, ACCOUNT_TTL_MS);
    this.lease.start();
  }

  async reserve(
    account: BudgetAccount,
    requestId: string,
    capNano: number,
    minNano: number,
    desiredNano: number,
    rateLimit?: FoldedRateLimit,
  ): Promise<ReserveOutcome> {
    const accountKey = accountKeyOf(account);
    const reservationKey = reservationKeyOf(requestId);
    const heldKey = heldKeyOf(this.lease.id);
    const send = (): Promise<ReserveReply> =>
      rateLimit
        ? this.commands.budgetReserveWithRateLimit(
            accountKey,
            reservationKey,
            heldKey,
            processesKey,
            rateLimitKeyOf(rateLimit.rule, rateLimit.key),
            capNano,
            minNano,
            desiredNano,
            RESERVATION_TTL_MS,
            ACCOUNT_TTL_MS,
            this.lease.id,
            rateLimit.rule.limit,
            rateLimit.rule.windowMs,
            requestId,
          )
        : this.commands.budgetReserve(
            accountKey,
            reservationKey,
            heldKey,
            processesKey,
            capNano,
            minNano,
            desiredNano,
            RESERVATION_TTL_MS,
            ACCOUNT_TTL_MS,
            this.lease.id,
          );
    for (let attempt = 0; attempt < 3; attempt++) {
      const [status, a, b, epoch, remaining, resetMs] = await this.guard(send);
      if (status === -1) {
        await this.load(account);
        continue;
      }
      const decision = rateLimit && { allowed: status !== 3, limit: rateLimit.rule.limit, remaining: remaining!, resetMs: resetMs! };
      if (status === 1) {
        this.held.set(requestId, { accountKey, epoch });
        return { ok: true, grantedNano: a, rateLimit: decision };
      }
      if (status === 3) return { ok: false, spentNano: 0, reservedNano: 0, rateLimit: decision };
      if (status === 2) return { ok: false, spentNano: a, reservedNano: b, frozen: true, rateLimit: decision };
      return { ok: false, spentNano: a, reservedNano: b, rateLimit: decision };
    }
    throw new ApiError("unavailable", "the budget store could not load this budget; try again");
  }

  /**
   * A hold of this process settles as usual; any other is a dead process's orphan, settled
   * by the reconciler once the call's row is written (see SETTLE_ORPHAN_LUA).
   */
  async settle(requestId: string, actualNano: number): Promise<void> {
    const held = this.held.get(requestId);
    if (!held) {
      // Never throws: an orphan not settled now is still listed by `orphans()`, and the
      // reconciler's next round releases it (its row, if any, is in the store by then).
      await this.commands.budgetSettleOrphan(reservationKeyOf(requestId), orphansKey).catch((err: unknown) => {
        this.logger.warn("settling a dead process's hold failed; the reconciler retries", { requestId, error: String(err) });
      });
      return;
    }
    try {
      await this.settles.settle({ reservationKey: reservationKeyOf(requestId), accountKey: held.accountKey, actualNano, epoch: held.epoch });
      this.held.delete(requestId);
      this.retrying.delete(requestId);
    } catch (err) {
      this.logger.warn("budget settle failed; will retry", { requestId, error: err instanceof Error ? err.message : String(err) });
      this.retrying.set(requestId, actualNano);
      this.scheduleRetry();
    }
  }

  async close(): Promise<void> {
    await this.lease.release();
  }

  /** A dead process's holds stay in Redis (as orphans), so nothing is adopted here. */
  async adopt(): Promise<void> {}

  async orphans(): Promise<string[]> {
    const keys = await this.guard(() => this.redis.hkeys(orphansKey));
    return keys.map((key) => key.slice(RESERVATION_PREFIX.length));
  }

  async snapshot(account: BudgetAccount): Promise<BudgetSnapshot> {
    const read = () => this.guard(() => this.redis.hmget(accountKeyOf(account), "spent", "reserved", "stale"));
    const first = await read();
    let [spent, reserved] = first;
    const stale = first[2];
    if (spent === null || stale !== null) {
      await this.load(account);
      [spent, reserved] = await read();
    }
    return { spentNano: Number(spent ?? 0), reservedNano: Number(reserved ?? 0) };
  }

  /** Settles still waiting for Redis to come back. */
  get pendingSettles(): number {
    return this.retrying.size;
  }

  private async load(account: BudgetAccount): Promise<void> {
    const [spent, frozenCap] = await this.guard(() => Promise.all([this.loadSpentNano(account), this.loadFrozenCapNano(account)]));
    await this.guard(() =>
      this.commands.budgetInit(accountKeyOf(account), spent, ACCOUNT_TTL_MS, crypto.randomUUID(), frozenCap === null ? "" : String(frozenCap)),
    );
  }

  private scheduleRetry(): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(async () => {
      this.retryTimer = null;
      // All at once: they go to Redis together, in as few batches as they fit.
      await Promise.all([...this.retrying].map(([requestId, actual]) => this.settle(requestId, actual)));
    }, 1000);
    this.retryTimer.unref?.();
  }

  /** Budgets fail closed: any Redis failure here is 503 `unavailable`, never a free pass. */
  private async guard<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (err instanceof ApiError) throw err;
      this.logger.warn("budget store (Redis) call failed", { error: err instanceof Error ? err.message : String(err) });
      throw new ApiError("unavailable", "the budget store is unavailable; no request is admitted without it");
    }
  }
}

const accountKeyOf = (account: BudgetAccount) => `bl:${account}`;
const RESERVATION_PREFIX = "br:";
const reservationKeyOf = (requestId: string) => `${RESERVATION_PREFIX}${requestId}`;
