/**
 * The budget ledger's Lua scripts (./budget-ledger.ts), each one atomic step in Redis.
 *
 * Keys: an account is a hash {spent, reserved, frozen?, epoch}; a reservation a hash
 * {account, amount, cap, epoch, owner}; each process lists its holds in its `held` hash as
 * "amount cap epoch account" (./process-lease.ts). The counters' epoch is one string key,
 * `bl:epoch` = "<run id>:<uuid>:<ready at, ms>". The scripts that check the epoch are
 * functions of one library (./budget-library.ts); the others are sent by EVALSHA.
 *
 * Why an epoch (ARCHITECTURE.md §3 "The hard cap": a live counter is never lower than the
 * truth). Redis can lose data without anyone noticing: restarted empty, flushed, failed over
 * to a replica that lagged, restored from an old snapshot. The scripts that admit calls first
 * check the epoch key against the server's own run id, which no data can bring back: a
 * server started again (a restart, a restore, a promoted replica) has a new one, and a flush
 * drops the key. Either way the script answers "epoch lost" and admits nothing; the process
 * starts a new epoch, and an account counts as loaded only once it was rebuilt from the
 * store in that epoch (`epoch` field). The check runs on every admission: it cannot rest on
 * a reconnect (a proxy in front of Redis keeps the connection through a failover) or on
 * anything the lost data could bring back. The run id comes from INFO once per Lua state (a
 * local of the library, which a new server starts without), since INFO on every reserve
 * tripled the script's cost (ARCHITECTURE.md §7 "Redis epoch on every reserve").
 *
 * `ready at`: a rebuild reads the store's journal, which a call enters only after its
 * reservation (src/services/chat.ts). A call reserved just before the loss may not be
 * journaled yet; so the first epoch after a loss lets no account be rebuilt before `ready
 * at`, REBUILD_WAIT_MS after its start, and a call that took CONFIRM_AFTER_MS or more from
 * its reserve to its journal entry asks Redis whether its hold is still there before it goes
 * upstream (the library's confirm). Either its entry was written before any rebuild read the
 * journal, or it is refused.
 */

/** What a rebuild after a loss waits for: calls reserved before it are journaled, or check their hold. */
export const REBUILD_WAIT_MS = 2000;
/** A call whose journal entry came this long after its reserve (or longer) checks its hold first. */
export const CONFIRM_AFTER_MS = 1000;

// KEYS: epoch, account, the registry, the rebuilt hash. ARGV: the epoch, spent, frozen cap
// ('' for none), account TTL, reservation TTL, then four per journaled hold: reservation key,
// amount, cap, owner. Sets the account from the store's truth, and every hold as a
// reservation of this epoch in its owner's held hash (registering the owner, so that a dead
// one's holds become orphans) and in `rebuilt` (the reconciler settles, from its row, a hold
// whose call ended before its owner could settle it here). Returns 1 done, 0 loaded already,
// -1 too early (before the epoch's `ready at`), -2 another epoch.
export const REBUILD_LUA = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -2 end
if redis.call('HGET', KEYS[2], 'epoch') == ARGV[1] then return 0 end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if now < tonumber(string.match(ARGV[1], ':(%d+)$')) then return -1 end
local reserved = 0
redis.call('DEL', KEYS[2])
for i = 6, #ARGV, 4 do
  local reservation, amount, cap, owner = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  reserved = reserved + tonumber(amount)
  redis.call('DEL', reservation)
  redis.call('HSET', reservation, 'account', KEYS[2], 'amount', amount, 'cap', cap, 'epoch', ARGV[1], 'owner', owner)
  redis.call('PEXPIRE', reservation, ARGV[5])
  redis.call('HSET', 'bp:held:' .. owner, reservation, amount .. ' ' .. cap .. ' ' .. ARGV[1] .. ' ' .. KEYS[2])
  redis.call('PEXPIRE', 'bp:held:' .. owner, ARGV[4])
  redis.call('SADD', KEYS[3], owner)
  redis.call('HSET', KEYS[4], reservation, KEYS[2])
end
redis.call('HSET', KEYS[2], 'spent', ARGV[2], 'reserved', string.format('%d', reserved), 'epoch', ARGV[1])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], 'frozen', ARGV[3]) end
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
`;
