/**
 * What the ordering operations leave in each backend, beyond the rules `checkStore`
 * runs (test/stores/contract.test.ts): the Redis keys of an ordered delivery share the entity's
 * hash tag (one Cluster slot, whatever braces the entity holds) and its version is kept at least
 * the idempotency TTL; the Postgres store records the version inside the transactional mode, and
 * only when the transaction commits.
 */

import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeVersion } from '../../src/ordering.ts';
import { createReceiver } from '../../src/receiver.ts';
import { signWebhook } from '../../src/sign.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { redisStore } from '../../src/stores/redis.ts';
import type { EntityOrder, OrderedClaimResult } from '../../src/stores/types.ts';
import { sharedPostgresUrl, uniqueTable } from '../support/postgres.ts';
import { CLIENT_KINDS, connectClient, countRoundTrips, deleteKeysUnder, keysUnder, sharedRedisUrl, uniquePrefix, type TestClient } from '../support/redis.ts';
import { SECRET } from '../receiver/support.ts';

/** The text Redis Cluster hashes for a key: between the first `{` and the next `}`, when not empty. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  return close === -1 || close === open + 1 ? key : key.slice(open + 1, close);
}

const TTL_MS = 86_400_000;

describe.skipIf(sharedRedisUrl === null)('redisStore ordering keys', () => {
  let admin: Redis;
  const prefix = uniquePrefix('ordering');
  beforeAll(() => {
    admin = new Redis(sharedRedisUrl!);
  });
  afterAll(async () => {
    await deleteKeysUnder(admin, prefix);
    admin.disconnect();
  });

  it.each(['default:o:sub_1', 'default:o:a}b{c', 'default:o:{x}', 'default:o:}'])('an ordered delivery of %j: its id under its own key, the version and lock under one hash tag; the version is kept the TTL', async (entity) => {
    const store = redisStore({ client: admin, prefix });
    const key = `default:s:evt_${encodeURIComponent(entity)}`;
    const order: EntityOrder = { entity, version: encodeVersion('2026-03-01T10:00:10.344522Z'), exclusive: true };
    const claimed = await store.ordering.claimOrdered(key, 30_000, TTL_MS, order);
    if (claimed.status !== 'acquired') throw new Error(`expected acquired, got ${claimed.status}`);
    const during = await keysUnder(admin, `${prefix}{${entity}}`);
    expect(Object.keys(during)).toEqual([':lock']);
    expect(during[':lock']!.value).toBe(claimed.token);
    // The id is where an unordered delivery of it looks: one id, with or without ordering.
    expect(await admin.get(prefix + key)).toBe(`lock:${claimed.token}`);
    expect(await store.ordering.completeOrdered(key, claimed.token, TTL_MS, order)).toBe(true);
    const after = await keysUnder(admin, `${prefix}{${entity}}`);
    expect(Object.keys(after)).toEqual(['']);
    expect(after['']!.value).toBe(order.version);
    expect(after['']!.pttl).toBeGreaterThan(TTL_MS - 60_000);
    expect(await admin.get(prefix + key)).toBe(`done:${claimed.token}`);
    expect(await admin.pttl(prefix + key)).toBeGreaterThan(TTL_MS - 60_000);
    const tags = new Set([`${prefix}{${entity}}`, `${prefix}{${entity}}:lock`, `${prefix}{${entity}}${key}`].map(hashTag));
    expect(tags.size).toBe(1);
  });

  it('keeps bigints past 2^53 apart, where a Redis number (a double) would not', async () => {
    const store = redisStore({ client: admin, prefix });
    const entity = 'default:o:ledger';
    const at = (version: bigint): EntityOrder => ({ entity, version: encodeVersion(version), exclusive: false });
    const first = await store.ordering.claimOrdered('default:s:big_1', 30_000, TTL_MS, at(2n ** 60n + 1n));
    if (first.status !== 'acquired') throw new Error(first.status);
    await store.ordering.completeOrdered('default:s:big_1', first.token, TTL_MS, at(2n ** 60n + 1n));
    expect((await store.ordering.claimOrdered('default:s:big_2', 30_000, TTL_MS, at(2n ** 60n))).status).toBe('stale');
    expect((await store.ordering.claimOrdered('default:s:big_3', 30_000, TTL_MS, at(2n ** 60n + 2n))).status).toBe('acquired');
  });
});

// How releases before this one kept an ordered delivery's id: under the entity's hash tag
// (`${prefix}{${entity}}${key}`), claimed and completed by these two scripts (KEYS: that id, the
// entity's version, its lock; the same version and lock keys as now).
const EARLIER_CLAIM_ORDERED = `local value = redis.call('GET', KEYS[1])
if value then
  if string.sub(value, 1, 4) == 'done' then return {1, 0} end
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then return {2, left} end
  return {2, 0}
end
local recorded = redis.call('GET', KEYS[2])
if recorded and recorded > ARGV[4] then
  redis.call('SET', KEYS[1], 'done:' .. ARGV[1], 'PX', ARGV[3])
  return {3, 0}
end
if ARGV[5] == '1' then
  if not redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local left = redis.call('PTTL', KEYS[3])
    if left > 0 then return {4, left} end
    return {4, 0}
  end
end
redis.call('SET', KEYS[1], 'lock:' .. ARGV[1], 'PX', ARGV[2])
return {0, 0}`;
const EARLIER_COMPLETE_ORDERED = `local value = redis.call('GET', KEYS[1])
if value == 'done:' .. ARGV[1] then return 1 end
if value ~= 'lock:' .. ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'done:' .. ARGV[1], 'PX', ARGV[2])
local recorded = redis.call('GET', KEYS[2])
if not recorded or recorded < ARGV[3] then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
elseif redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
return 1`;

describe.skipIf(sharedRedisUrl === null).each(CLIENT_KINDS)('redisStore ordering: one id with ordering or without, via %s', (kind) => {
  let admin: Redis;
  let client: TestClient;
  const prefix = uniquePrefix(`one-id-${kind}`);
  beforeAll(async () => {
    admin = new Redis(sharedRedisUrl!);
    client = await connectClient(kind, sharedRedisUrl!);
  });
  afterAll(async () => {
    await deleteKeysUnder(admin, prefix);
    admin.disconnect();
    client.close();
  });
  const at = (entity: string, version: number, exclusive = true): EntityOrder => ({ entity, version: encodeVersion(version), exclusive });
  const acquired = (result: OrderedClaimResult): string => {
    if (result.status !== 'acquired') throw new Error(`expected acquired, got ${result.status}`);
    return result.token;
  };

  it('an id completed without ordering is a duplicate with it, under any entity, and the reverse; a duplicate takes no entity lock', async () => {
    const store = redisStore({ client: client.client, prefix });
    const plain = 'default:s:evt_plain';
    const owner = await store.claim(plain, 30_000);
    if (owner.status !== 'acquired') throw new Error(owner.status);
    expect(await store.complete(plain, owner.token, TTL_MS)).toBe(true);
    expect(await store.ordering.claimOrdered(plain, 30_000, TTL_MS, at('default:o:a', 1))).toEqual({ status: 'completed' });
    expect(await admin.exists(`${prefix}{default:o:a}:lock`)).toBe(0);

    const ordered = 'default:s:evt_ordered';
    const token = acquired(await store.ordering.claimOrdered(ordered, 30_000, TTL_MS, at('default:o:b', 1)));
    expect(await store.claim(ordered, 30_000)).toMatchObject({ status: 'processing' });
    expect(await store.ordering.claimOrdered(ordered, 30_000, TTL_MS, at('default:o:c', 1))).toMatchObject({ status: 'processing' });
    expect(await store.ordering.completeOrdered(ordered, token, TTL_MS, at('default:o:b', 1))).toBe(true);
    expect(await store.claim(ordered, 30_000)).toEqual({ status: 'completed' });
    expect(await store.ordering.claimOrdered(ordered, 30_000, TTL_MS, at('default:o:c', 1))).toEqual({ status: 'completed' });
  });

  it('an id that an earlier release completed under the entity’s tag is a duplicate, moved to the id’s own key for the rest of its TTL', async () => {
    const store = redisStore({ client: client.client, prefix });
    const entity = 'default:o:upgraded';
    const tagged = `${prefix}{${entity}}`;
    const key = 'default:s:evt_before_upgrade';
    const version = encodeVersion(5);
    // Written the old way: claimed and completed under the entity's tag, a TTL of 10 minutes.
    expect(await admin.eval(EARLIER_CLAIM_ORDERED, 3, tagged + key, tagged, `${tagged}:lock`, 'a'.repeat(32), '30000', '600000', version, '1')).toEqual([0, 0]);
    expect(await admin.eval(EARLIER_COMPLETE_ORDERED, 3, tagged + key, tagged, `${tagged}:lock`, 'a'.repeat(32), '600000', version)).toBe(1);
    expect(await admin.exists(prefix + key)).toBe(0);

    expect(await store.ordering.claimOrdered(key, 30_000, TTL_MS, at(entity, 6))).toEqual({ status: 'completed' });
    // Moved to the id's own key for the rest of its TTL: an unordered delivery finds it too.
    expect(await admin.get(prefix + key)).toMatch(/^done:[0-9a-f]{32}$/);
    const left = await admin.pttl(prefix + key);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(600_000);
    expect(await store.claim(key, 30_000)).toEqual({ status: 'completed' });
    // The duplicate took no lock, and the version the earlier release recorded still holds.
    expect(await admin.exists(`${tagged}:lock`)).toBe(0);
    expect(await store.ordering.claimOrdered('default:s:evt_older', 30_000, TTL_MS, at(entity, 4))).toEqual({ status: 'stale' });
    acquired(await store.ordering.claimOrdered('default:s:evt_newer', 30_000, TTL_MS, at(entity, 6)));
  });

  it('an id an earlier release holds under the entity’s tag is processing, and the new claim leaves nothing held', async () => {
    const store = redisStore({ client: client.client, prefix });
    const entity = 'default:o:in_flight';
    const tagged = `${prefix}{${entity}}`;
    const key = 'default:s:evt_in_flight';
    expect(await admin.eval(EARLIER_CLAIM_ORDERED, 3, tagged + key, tagged, `${tagged}:lock`, 'b'.repeat(32), '30000', '600000', encodeVersion(1), '0')).toEqual([0, 0]);
    const answer = await store.ordering.claimOrdered(key, 30_000, TTL_MS, at(entity, 1, false));
    expect(answer.status).toBe('processing');
    expect(answer.status === 'processing' && answer.retryAfterMs).toBeGreaterThan(0);
    expect(answer.status === 'processing' && answer.retryAfterMs).toBeLessThanOrEqual(30_000);
    expect(await admin.exists(prefix + key)).toBe(0);
  });

  it('an ordered claim is two round trips and a duplicate one; a completion two', async () => {
    const store = redisStore({ client: client.client, prefix });
    const entity = 'default:o:round_trips';
    // Every script loaded first, so that each operation below is EVALSHA alone.
    const warm = acquired(await store.ordering.claimOrdered('default:s:rt_0', 30_000, TTL_MS, at(entity, 1)));
    expect(await store.ordering.completeOrdered('default:s:rt_0', warm, TTL_MS, at(entity, 1))).toBe(true);
    let token = '';
    const claim = await countRoundTrips(sharedRedisUrl!, client, async () => {
      token = acquired(await store.ordering.claimOrdered('default:s:rt_1', 30_000, TTL_MS, at(entity, 2)));
    });
    expect(claim.commands).toEqual(['evalsha', 'evalsha']);
    const complete = await countRoundTrips(sharedRedisUrl!, client, async () => {
      expect(await store.ordering.completeOrdered('default:s:rt_1', token, TTL_MS, at(entity, 2))).toBe(true);
    });
    expect(complete.commands).toEqual(['evalsha', 'evalsha']);
    const duplicate = await countRoundTrips(sharedRedisUrl!, client, async () => {
      expect(await store.ordering.claimOrdered('default:s:rt_1', 30_000, TTL_MS, at(entity, 2))).toEqual({ status: 'completed' });
    });
    expect(duplicate.commands).toEqual(['evalsha']);
  });

  it('stale and busy claims leave the id done and free respectively, and release frees both', async () => {
    const store = redisStore({ client: client.client, prefix });
    const entity = 'default:o:judged';
    const first = acquired(await store.ordering.claimOrdered('default:s:j1', 30_000, TTL_MS, at(entity, 5)));
    expect(await store.ordering.claimOrdered('default:s:j2', 30_000, TTL_MS, at(entity, 6))).toMatchObject({ status: 'busy' });
    expect(await admin.exists(`${prefix}default:s:j2`)).toBe(0);
    expect(await store.ordering.completeOrdered('default:s:j1', first, TTL_MS, at(entity, 5))).toBe(true);
    expect(await store.ordering.claimOrdered('default:s:j3', 30_000, TTL_MS, at(entity, 4))).toEqual({ status: 'stale' });
    expect(await admin.get(`${prefix}default:s:j3`)).toMatch(/^done:/);
    const second = acquired(await store.ordering.claimOrdered('default:s:j2', 30_000, TTL_MS, at(entity, 6)));
    expect(await store.ordering.releaseOrdered('default:s:j2', second, at(entity, 6))).toBe(true);
    expect(await admin.exists(`${prefix}default:s:j2`, `${prefix}{${entity}}:lock`)).toBe(0);
  });
});

describe.skipIf(sharedPostgresUrl === null)('postgresStore ordering in the transactional mode', () => {
  let pool: pg.Pool;
  const table = uniqueTable('ordering');
  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: sharedPostgresUrl!, max: 4 });
    await pool.query(`CREATE TABLE ${table}_effects (entity text, version text)`);
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS "${table}", ${table}_effects, "${table}_unsigned"`);
    await pool.end();
  });

  it('records the version with the side effect on commit, and nothing when the transaction rolls back', async () => {
    const store = postgresStore({ client: pool, table });
    await store.setup();
    const receiver = createReceiver({ secrets: SECRET, idempotency: { store }, ordering: { key: (event) => event.data.id, version: (event) => event.timestamp } });
    const deliver = async (id: string, timestamp: string, fail = false) => {
      const body = JSON.stringify({ type: 'subscription.updated', timestamp, data: { id: 'sub_1' } });
      const { headers } = await signWebhook({ secret: SECRET, body, id });
      return receiver.handle({ headers, body }, (webhook, context) =>
        store.transaction(context, async (tx) => {
          await tx.query(`INSERT INTO ${table}_effects (entity, version) VALUES ('sub_1', $1)`, [timestamp]);
          if (fail) throw new Error('the side effect failed');
        }),
      );
    };
    await expect(deliver('evt_new', '2026-03-01T10:05:00Z', true)).rejects.toThrow('the side effect failed');
    // Rolled back: no version recorded, so an older event still applies.
    expect((await deliver('evt_old', '2026-03-01T10:00:00Z')).outcome).toBe('processed');
    expect((await deliver('evt_new', '2026-03-01T10:05:00Z')).outcome).toBe('processed');
    expect((await deliver('evt_mid', '2026-03-01T10:03:00Z')).outcome).toBe('stale');
    const effects = (await pool.query<{ version: string }>(`SELECT version FROM ${table}_effects`)).rows.map((row) => row.version);
    expect(effects).toEqual(['2026-03-01T10:00:00Z', '2026-03-01T10:05:00Z']);
    const entity = (await pool.query<{ version: string }>(`SELECT version FROM "${table}" WHERE key = 'default:o:sub_1'`)).rows[0];
    expect(entity?.version).toBe(encodeVersion('2026-03-01T10:05:00Z'));
  });

  it('setup adds the ordering columns to a table made before ordering existed', async () => {
    const old = uniqueTable('ordering_old');
    await pool.query(`CREATE TABLE "${old}" (key text PRIMARY KEY, token text NOT NULL, completed boolean NOT NULL DEFAULT false, expires_at timestamptz NOT NULL)`);
    try {
      const store = postgresStore({ client: pool, table: old });
      await store.setup();
      const claimed = await store.ordering.claimOrdered('default:s:e1', 30_000, TTL_MS, { entity: 'default:o:x', version: encodeVersion(1), exclusive: true });
      expect(claimed.status).toBe('acquired');
    } finally {
      await pool.query(`DROP TABLE IF EXISTS "${old}", "${old}_unsigned"`);
    }
  });
});
