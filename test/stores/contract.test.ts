/**
 * The store contract, run by the conformance kit users run on their own stores
 * (`checkStore` from `webhook-receiver/testing`): the memory store, and the Redis store through
 * ioredis and through node-redis on a real redis-server, and the Postgres store through pg and
 * postgres.js on a real PostgreSQL, and the DynamoDB store on dynalite. The Durable Object store
 * runs the same kit inside workerd (test/stores/durable-object.test.ts).
 */

import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DEFAULT_DYNAMO_CLOCK_MARGIN_MS, dynamoStore, type DynamoStore, type DynamoStoreOptions } from '../../src/stores/dynamodb.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { postgresStore } from '../../src/stores/postgres.ts';
import { redisStore } from '../../src/stores/redis.ts';
import { checkStore, type StoreConformanceReport, type StoreRule } from '../../src/testing/check-store.ts';
import { localConfig, startDynalite, type Dynalite } from '../support/dynamodb.ts';
import { openBackend, type StoreBackend } from '../support/stores.ts';
import { connectPostgres, POSTGRES_KINDS, sharedPostgresUrl } from '../support/postgres.ts';
import { sharedRedisUrl, type ClientKind } from '../support/redis.ts';
import { freePort } from '../support/redis-server.ts';

/** The project's stores hand out 128-bit tokens in lower-case hex. */
const tokenPattern = /^[0-9a-f]{32}$/;

const outcomes = (report: StoreConformanceReport, outcome: 'passed' | 'skipped'): StoreRule[] =>
  report.rules.filter((rule) => rule.outcome === outcome).map((rule) => rule.rule);

/** The ordering rules: every shipped store but DynamoDB has the ordering operations. */
const ORDERING: StoreRule[] = [
  'ordering-stale',
  'ordering-compare',
  'ordering-exclusive',
  'ordering-failed-newer',
  'ordering-never-down',
  'ordering-fencing',
  'ordering-concurrent',
  'ordering-lock-expiry',
  'ordering-forget',
  'ordering-one-id',
];

const EVERY_RULE: StoreRule[] = [
  'arguments',
  'claim',
  'release',
  'complete-idempotent',
  'fencing',
  'unknown-keys',
  'independent-keys',
  'fractional-durations',
  'concurrent-claims',
  'expiry-takeover',
  'expiry-stale-owner',
  'concurrent-takeover',
  'ttl',
  'extend',
  'shared',
  'ping',
  'unreachable',
  ...ORDERING,
];
const without = (...rules: StoreRule[]) => EVERY_RULE.filter((rule) => !rules.includes(rule));

describe('store contract: memoryStore', () => {
  it('keeps every rule on the kit’s clock', async () => {
    expect(memoryStore().name).toBe('memory');
    const report = await checkStore(({ now }) => memoryStore({ now }), { clock: 'manual', tokenPattern });
    expect(outcomes(report, 'passed')).toEqual(without('shared', 'unreachable'));
    expect(outcomes(report, 'skipped')).toEqual(['shared', 'unreachable']);
  });

  it('keeps every rule on the real clock, waiting on its own expiry', async () => {
    const report = await checkStore(() => memoryStore(), { tokenPattern });
    expect(outcomes(report, 'passed')).toEqual(without('shared', 'unreachable'));
  });
});

describe.each<ClientKind>(['ioredis', 'node-redis'])('store contract: redisStore via %s', (kind) => {
  const available = sharedRedisUrl !== null;
  let backend: StoreBackend | undefined;
  const closers: (() => void)[] = [];

  beforeAll(async () => {
    if (available) backend = await openBackend(kind);
  });
  afterAll(async () => {
    for (const close of closers) close();
    await backend?.close();
  });

  /** The store on a client that cannot reach its server: nothing listens on the port. */
  const unreachable = async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    if (kind === 'ioredis') {
      const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
      client.on('error', () => {});
      closers.push(() => client.disconnect());
      return redisStore({ client, timeoutMs: 500 });
    }
    // Never connected (`connect()` would reject): node-redis refuses commands on a closed client.
    const client = createClient({ url });
    client.on('error', () => {});
    return redisStore({ client, timeoutMs: 500 });
  };

  it.skipIf(!available)('keeps every rule on a real redis-server: instances share it, an unreachable server rejects', async () => {
    // Each open() is a new store on the shared client: two app instances, one Redis.
    expect(backend!.open('contract')).not.toBe(backend!.open('contract'));
    expect(backend!.open('contract').name).toBe('redis');
    const report = await checkStore(() => backend!.open('contract'), { shared: true, unreachable, tokenPattern });
    expect(outcomes(report, 'passed')).toEqual(EVERY_RULE);
  });
});

describe.each(POSTGRES_KINDS)('store contract: postgresStore via %s', (kind) => {
  const available = sharedPostgresUrl !== null;
  let backend: StoreBackend | undefined;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    if (available) backend = await openBackend(kind);
  });
  afterAll(async () => {
    for (const close of closers) await close();
    await backend?.close();
  });

  /** The store on a client whose server is gone: nothing listens on the port. */
  const unreachable = async () => {
    const connection = connectPostgres(kind, `postgres://postgres@127.0.0.1:${await freePort()}/postgres`, 1);
    closers.push(() => connection.close().catch(() => undefined));
    return postgresStore({ client: connection.client, timeoutMs: 500 });
  };

  it.skipIf(!available)('keeps every rule on a real PostgreSQL: instances share it, an unreachable server rejects', async () => {
    // Each open() is a new store on the same table: two app instances, one database.
    expect(backend!.open('contract')).not.toBe(backend!.open('contract'));
    expect(backend!.open('contract').name).toBe('postgres');
    const report = await checkStore(() => backend!.open('contract'), { shared: true, unreachable, tokenPattern });
    expect(outcomes(report, 'passed')).toEqual(EVERY_RULE);
  });
});

describe('store contract: dynamoStore on dynalite', () => {
  let dynalite: Dynalite;
  let open: (options?: Omit<DynamoStoreOptions, 'client' | 'table'>) => DynamoStore;
  const unreachableClients: DynamoDBClient[] = [];

  beforeAll(async () => {
    dynalite = await startDynalite();
    ({ open } = await dynalite.table());
  });
  afterAll(async () => {
    for (const client of unreachableClients) client.destroy();
    await dynalite?.close();
  });

  /** The store on a client whose endpoint is gone: nothing listens on the port. */
  const unreachable = async () => {
    const client = new DynamoDBClient({ ...localConfig(`http://127.0.0.1:${await freePort()}`), maxAttempts: 1 });
    unreachableClients.push(client);
    return dynamoStore({ client, table: 'claims', timeoutMs: 500 });
  };

  it('keeps every rule on the kit’s clock (no clock margin): instances share the table, an unreachable endpoint rejects', async () => {
    // Each open() is a new store on the same table: two Lambda containers, one table.
    expect(open()).not.toBe(open());
    expect(open().name).toBe('dynamodb');
    // The kit moves its clock just past a lock's end and expects a takeover there: a margin would
    // (rightly) refuse it, so this run has none; test/stores/dynamodb.test.ts proves the margin.
    const report = await checkStore(({ now }) => open({ now, clockMarginMs: 0 }), { clock: 'manual', shared: true, unreachable, tokenPattern });
    // Without transactions, one conditional write cannot claim an id and check its entity: the
    // store has no ordering operations, and their rules are skipped.
    expect(outcomes(report, 'passed')).toEqual(without(...ORDERING));
    expect(outcomes(report, 'skipped')).toEqual(ORDERING);
  });

  it('keeps every rule on the real clock at its default options, waiting on its own expiry', async () => {
    // The default clock margin (1000 ms) outlasts the kit's lock of 200 ms: the owner stops at the
    // lock's end, other instances take over once the margin has passed too, and the kit waits on
    // that within its grace period rather than expecting a takeover at the lock's end.
    expect(DEFAULT_DYNAMO_CLOCK_MARGIN_MS).toBe(1000);
    const report = await checkStore(() => open(), { shared: true, tokenPattern });
    expect(outcomes(report, 'passed')).toEqual(without('unreachable', ...ORDERING));
  });
});
