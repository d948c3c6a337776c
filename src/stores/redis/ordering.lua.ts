/** The Lua of ordering: an entity's version and lock, under the entity's hash tag. */

// Ordering. An ordered delivery's id is the same key as an unordered one's (`${prefix}${key}`),
// claimed, completed, released and extended by the scripts of claims.lua.ts: an id is one id whether
// ordering is on, off, or keyed otherwise, so turning ordering on (or changing its key, or a
// fleet of both during a deploy) never runs an id that was already processed. The entity's
// version `${prefix}{${entity}}` and lock `${prefix}{${entity}}:lock` share the entity's hash tag
// and change in one script; the id's key is in another slot, so in Redis Cluster the two cannot
// change together: the id's script runs first and is the only authority on the id, and the
// entity's script runs while the id is held (an ordered claim is two round trips).
//
// Versions are fixed-width strings of ASCII digits after one letter, so Lua's string comparison
// orders them as their values, whatever the server's collation; they are never read as numbers (a
// double would round a bigint past 2^53).
//
// KEYS: the id under the entity's tag (`${prefix}{${entity}}${key}`, where releases before this
// one kept ordered ids: read only, so that an id completed there is still a duplicate until its
// TTL has run out), the entity's version, the entity's lock.
//
// Claim, run once the id is held: ARGV token, lockMs, version, exclusive ('1' or '0'). Replies
// {kind, ms}: 0 go on (exclusive: the entity's lock is now this token's), 1 the id was completed
// under the entity's tag (ms: for how much longer), 2 it is held there (ms left, 0 unknown), 3
// stale, 4 busy for ms (the entity's lock; 0 unknown).
export const ENTITY_CLAIM = `local tagged = redis.call('GET', KEYS[1])
if tagged then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then left = 0 end
  if string.sub(tagged, 1, 4) == 'done' then return {1, left} end
  return {2, left}
end
local recorded = redis.call('GET', KEYS[2])
if recorded and recorded > ARGV[3] then return {3, 0} end
if ARGV[4] == '1' then
  if not redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local left = redis.call('PTTL', KEYS[3])
    if left > 0 then return {4, left} end
    return {4, 0}
  end
end
return {0, 0}`;

// Complete, run once the id's own script completed it for this token: ARGV token, ttlMs,
// version. The entity's version is raised (never lowered) and kept at least ttlMs, and the lock
// this token holds is freed. Running it again changes nothing more (a retried completion).
export const ENTITY_COMPLETE = `local recorded = redis.call('GET', KEYS[2])
if not recorded or recorded < ARGV[3] then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
elseif redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
return 1`;

// Release: ARGV token. The entity's lock this token holds is freed; the version is untouched.
export const ENTITY_RELEASE = `if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
return 1`;

// Extend, run once the id's own script extended it: ARGV token, lockMs. The entity's lock, while
// this token holds it.
export const ENTITY_EXTEND = `if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1`;

// Forget an entity's version (KEYS[1]): its next delivery of any version is not stale.
export const FORGET_VERSION = `redis.call('DEL', KEYS[1])
return 1`;
