/**
 * The Lua of unsigned ids: a fixed set of hashes, KEYS[1] the id's bucket, each holding at most
 * ARGV[4] ids (passed to the claim), so unsigned traffic never holds more.
 */

// Unsigned ids: one hash a bucket, a field per id (the SHA-1 of its whole key, ARGV[1]) holding
// `lock:<token>:<until>` or `done:<token>:<until>` (a token is 32 hex digits, so the time, epoch
// ms on the server's clock, starts at character 39). Fields have no expiry of their own: a field
// past its time counts as absent, and the hash expires once its last field has. ARGV[2] is the
// token, ARGV[3] a duration in ms.
const UNSIGNED_ENTRY = `local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local id = redis.sha1hex(ARGV[1])
local value = redis.call('HGET', KEYS[1], id)
local function untilOf(entry) return tonumber(string.sub(entry, 39)) end
local function owned(state) return value and string.sub(value, 1, 37) == state .. ':' .. ARGV[2] and untilOf(value) > now end
local function hold(state, ms)
  redis.call('HSET', KEYS[1], id, state .. ':' .. ARGV[2] .. ':' .. string.format('%.0f', now + ms))
  if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ms) end
end
`;

// Claim, as the signed CLAIM (claims.lua.ts), in the id's bucket of at most ARGV[4] ids. A full
// bucket makes room by deleting expired entries, else the completion that expires first (that
// unsigned id is forgotten early); full of live claims, it refuses: -3.
export const UNSIGNED_CLAIM = `${UNSIGNED_ENTRY}
if value and untilOf(value) > now then
  if string.sub(value, 1, 4) == 'done' then return -1 end
  return untilOf(value) - now
end
if not value and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  local entries = redis.call('HGETALL', KEYS[1])
  local freed, oldest, oldestUntil = false, nil, nil
  for i = 1, #entries, 2 do
    local entryUntil = untilOf(entries[i + 1])
    if entryUntil <= now then
      redis.call('HDEL', KEYS[1], entries[i])
      freed = true
    elseif string.sub(entries[i + 1], 1, 4) == 'done' and (oldestUntil == nil or entryUntil < oldestUntil) then
      oldest, oldestUntil = entries[i], entryUntil
    end
  end
  if not freed then
    if oldest == nil then return -3 end
    redis.call('HDEL', KEYS[1], oldest)
  end
end
hold('lock', tonumber(ARGV[3]))
return 0`;

export const UNSIGNED_COMPLETE = `${UNSIGNED_ENTRY}
if owned('done') then return 1 end
if not owned('lock') then return 0 end
hold('done', tonumber(ARGV[3]))
return 1`;

export const UNSIGNED_RELEASE = `${UNSIGNED_ENTRY}
if not owned('lock') then return 0 end
redis.call('HDEL', KEYS[1], id)
return 1`;

export const UNSIGNED_EXTEND = `${UNSIGNED_ENTRY}
if not owned('lock') then return 0 end
hold('lock', tonumber(ARGV[3]))
return 1`;
