/**
 * What the ordering operations leave in each backend (issue 26), beyond the rules `checkStore`
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
import type { EntityOrder } from '../../src/stores/types.ts';
import { sharedPostgresUrl, uniqueTable } from '../support/postgres.ts';
import { deleteKeysUnder, keysUnder, sharedRedisUrl, uniquePrefix } from '../support/redis.ts';
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

  it.each(['default:o:sub_1', 'default:o:a}b{c', 'default:o:{x}', 'default:o:}'])('an ordered delivery of %j: its id, version and lock share one hash tag; the version is kept the TTL', async (entity) => {
    const store = redisStore({ client: admin, prefix });
    const key = `default:s:evt_${entity.length}`;
    const order: EntityOrder = { entity, version: encodeVersion('2026-03-01T10:00:10.344522Z'), exclusive: true };
    const claimed = await store.claimOrdered(key, 30_000, TTL_MS, order);
    if (claimed.status !== 'acquired') throw new Error(`expected acquired, got ${claimed.status}`);
    const during = await keysUnder(admin, `${prefix}{${entity}}`);
    expect(Object.keys(during).sort()).toEqual([':lock', key].sort());
    expect(during[':lock']!.value).toBe(claimed.token);
    expect(await store.completeOrdered(key, claimed.token, TTL_MS, order)).toBe(true);
    const after = await keysUnder(admin, `${prefix}{${entity}}`);
    expect(Object.keys(after).sort()).toEqual(['', key].sort());
    expect(after['']!.value).toBe(order.version);
    expect(after['']!.pttl).toBeGreaterThan(TTL_MS - 60_000);
    const tags = new Set([`${prefix}{${entity}}${key}`, `${prefix}{${entity}}`, `${prefix}{${entity}}:lock`].map(hashTag));
    expect(tags.size).toBe(1);
  });

  it('keeps bigints past 2^53 apart, where a Redis number (a double) would not', async () => {
    const store = redisStore({ client: admin, prefix });
    const entity = 'default:o:ledger';
    const at = (version: bigint): EntityOrder => ({ entity, version: encodeVersion(version), exclusive: false });
    const first = await store.claimOrdered('default:s:big_1', 30_000, TTL_MS, at(2n ** 60n + 1n));
    if (first.status !== 'acquired') throw new Error(first.status);
    await store.completeOrdered('default:s:big_1', first.token, TTL_MS, at(2n ** 60n + 1n));
    expect((await store.claimOrdered('default:s:big_2', 30_000, TTL_MS, at(2n ** 60n))).status).toBe('stale');
    expect((await store.claimOrdered('default:s:big_3', 30_000, TTL_MS, at(2n ** 60n + 2n))).status).toBe('acquired');
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
      const claimed = await store.claimOrdered('default:s:e1', 30_000, TTL_MS, { entity: 'default:o:x', version: encodeVersion(1), exclusive: true });
      expect(claimed.status).toBe('acquired');
    } finally {
      await pool.query(`DROP TABLE IF EXISTS "${old}", "${old}_unsigned"`);
    }
  });
});
