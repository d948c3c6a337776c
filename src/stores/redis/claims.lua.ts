/**
 * The Lua of signed ids: one key an id, holding `lock:<token>` while a handler runs, then
 * `done:<token>`. KEYS[1] is the id's key, ARGV[1] the token.
 */

// Claim: take a free key for ARGV[2] ms, else say why not. Replies: 0 acquired, -1 completed,
// n > 0 held for n more ms, -2 held without an expiry (never written by this store).
export const CLAIM = `if redis.call('SET', KEYS[1], 'lock:' .. ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
if string.sub(redis.call('GET', KEYS[1]), 1, 4) == 'done' then return -1 end
local left = redis.call('PTTL', KEYS[1])
if left > 0 then return left end
return -2`;

// Complete: while the token still owns the key, mark it done (keeping the token) for ARGV[2] ms;
// a key this token already completed answers 1 again.
export const COMPLETE = `local value = redis.call('GET', KEYS[1])
if value == 'done:' .. ARGV[1] then return 1 end
if value ~= 'lock:' .. ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'done:' .. ARGV[1], 'PX', ARGV[2])
return 1`;

// Release: only while the token still owns the key, free it for the sender's retry.
export const RELEASE = `if redis.call('GET', KEYS[1]) ~= 'lock:' .. ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`;

// Extend: while the token still owns the key, hold it for ARGV[2] ms from now.
export const EXTEND = `if redis.call('GET', KEYS[1]) ~= 'lock:' .. ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;
