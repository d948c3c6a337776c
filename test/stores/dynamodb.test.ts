/**
 * What only the DynamoDB store does, on dynalite started here: option checks, one conditional
 * write per operation (and the read a failed condition needs when the old item does not come back
 * with it), the item layout and its TTL, expiry judged by each item's own end on the caller's
 * clock with a margin (two clients with skewed clocks), the unsigned slots, set-up, and failures:
 * an endpoint that refuses, one that never answers, one that throttles.
 */

import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { CreateTableCommand, DeleteItemCommand, DynamoDBClient, GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  DEFAULT_DYNAMO_CLOCK_MARGIN_MS,
  DEFAULT_DYNAMO_TIMEOUT_MS,
  DEFAULT_DYNAMO_UNSIGNED_MAX,
  DYNAMO_TTL_ATTRIBUTE,
  StoreError,
  dynamoStore,
  dynamoTableDefinition,
  type DynamoClientLike,
  type DynamoStore,
  type DynamoStoreOptions,
} from '../../src/stores/dynamodb.ts';
import { localConfig, startDynalite, type Dynalite } from '../support/dynamodb.ts';
import { freePort } from '../support/redis-server.ts';
import { token } from '../support/stores.ts';

let dynalite: Dynalite;
let raw: DynamoDBClient;
let table: string;
let open: (options?: Omit<DynamoStoreOptions, 'client' | 'table'>, client?: DynamoClientLike) => DynamoStore;

beforeAll(async () => {
  dynalite = await startDynalite();
  raw = dynalite.client();
  ({ table, open } = await dynalite.table());
});
afterAll(async () => {
  await dynalite?.close();
});

let keys = 0;
const key = (kind: 's' | 'u' = 's') => `ns:${kind}:msg_${++keys}`;

/** A manual clock, in epoch ms. */
function clock(start = Date.now()) {
  const state = { time: start };
  return { now: () => state.time, pass: (ms: number) => void (state.time += ms), state };
}

/** A client that records the command of each request before sending it. */
function counting(client: DynamoClientLike = raw): DynamoClientLike & { sent: string[] } {
  const sent: string[] = [];
  return {
    sent,
    send(command, options) {
      sent.push(command.constructor.name);
      return client.send(command, options);
    },
  };
}

async function item(pk: string): Promise<Record<string, unknown> | undefined> {
  const reply = await raw.send(new GetItemCommand({ TableName: table, Key: { pk: { S: pk } }, ConsistentRead: true }));
  return reply.Item;
}

describe('dynamoStore options', () => {
  it('needs an options object, a client with send() and a table name', () => {
    expect(() => dynamoStore(undefined as never)).toThrow(new TypeError('dynamoStore needs an options object: dynamoStore({ client, table })'));
    expect(() => dynamoStore({ table: 'claims' } as never)).toThrow(new TypeError('dynamoStore client must be a DynamoDBClient from @aws-sdk/client-dynamodb: undefined has no send()'));
    expect(() => dynamoStore({ client: new Map() as never, table: 'claims' })).toThrow(
      new TypeError('dynamoStore client must be a DynamoDBClient from @aws-sdk/client-dynamodb: a Map has no send()'),
    );
    for (const bad of [undefined, '', 'ab', 'has space', 'a/b', 'x'.repeat(256), 42]) {
      expect(() => dynamoStore({ client: raw, table: bad as never })).toThrow(TypeError);
    }
    expect(() => dynamoStore({ client: raw, table: 'a/b' })).toThrow(
      new TypeError('dynamoStore table must be a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -), got "a/b"'),
    );
  });

  it('checks timeoutMs, clockMarginMs, unsignedMax and now', () => {
    for (const timeoutMs of [0, -5, Number.NaN, 2 ** 31, '100' as never]) {
      expect(() => dynamoStore({ client: raw, table, timeoutMs })).toThrow(
        new RangeError(`dynamoStore timeoutMs must be a positive number of milliseconds up to 2147483647 (default ${DEFAULT_DYNAMO_TIMEOUT_MS})`),
      );
    }
    for (const clockMarginMs of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '5' as never]) {
      expect(() => dynamoStore({ client: raw, table, clockMarginMs })).toThrow(
        new RangeError(`dynamoStore clockMarginMs must be a whole number of milliseconds, 0 or more (default ${DEFAULT_DYNAMO_CLOCK_MARGIN_MS})`),
      );
    }
    for (const unsignedMax of [0, -1, 1.5, Number.NaN, '5' as never]) {
      expect(() => dynamoStore({ client: raw, table, unsignedMax })).toThrow(new RangeError('dynamoStore unsignedMax must be a positive whole number of ids'));
    }
    expect(() => dynamoStore({ client: raw, table, now: 5 as never })).toThrow(new TypeError('dynamoStore now must be a function returning epoch milliseconds'));
    expect([DEFAULT_DYNAMO_TIMEOUT_MS, DEFAULT_DYNAMO_CLOCK_MARGIN_MS, DEFAULT_DYNAMO_UNSIGNED_MAX, DYNAMO_TTL_ATTRIBUTE]).toEqual([2000, 1000, 10_000, 'ttl']);
  });

  it('takes the SDK’s DynamoDBClient by type (checked by tsc), and nothing without send', () => {
    expectTypeOf<DynamoDBClient>().toExtend<DynamoClientLike>();
    expectTypeOf<{ query(): Promise<unknown> }>().not.toExtend<DynamoClientLike>();
  });

  it('describes its table for CreateTable: partition key pk, on demand', () => {
    expect(dynamoTableDefinition('claims')).toEqual({
      TableName: 'claims',
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    });
  });
});

describe('dynamoStore requests', () => {
  it('sends one conditional write per claim, complete, release and extend; a duplicate adds one consistent read on dynalite', async () => {
    const client = counting();
    const store = open({}, client);
    const k = key();
    const owner = token(await store.claim(k, 60_000));
    expect(client.sent).toEqual(['PutItemCommand']);
    expect(await store.extend(k, owner, 60_000)).toBe(true);
    expect(client.sent.slice(1)).toEqual(['UpdateItemCommand']);
    client.sent.length = 0;
    expect(await store.claim(k, 60_000)).toMatchObject({ status: 'processing' });
    // dynalite ignores ReturnValuesOnConditionCheckFailure: the store reads the item it lost to.
    expect(client.sent).toEqual(['PutItemCommand', 'GetItemCommand']);
    client.sent.length = 0;
    expect(await store.complete(k, owner, 600_000)).toBe(true);
    expect(client.sent).toEqual(['UpdateItemCommand']);
    client.sent.length = 0;
    expect(await store.claim(k, 60_000)).toEqual({ status: 'completed' });
    expect(client.sent).toEqual(['PutItemCommand', 'GetItemCommand']);

    const other = key();
    client.sent.length = 0;
    expect(await store.release(other, 'nobody')).toBe(false);
    const released = token(await store.claim(other, 60_000));
    expect(await store.release(other, released)).toBe(true);
    expect(client.sent).toEqual(['DeleteItemCommand', 'PutItemCommand', 'DeleteItemCommand']);
  });

  it('uses the old item a failed condition carries (as DynamoDB returns it), with no read', async () => {
    // DynamoDB puts the old item on ConditionalCheckFailedException when asked
    // (ReturnValuesOnConditionCheckFailure: ALL_OLD); dynalite does not. This client adds it,
    // read from dynalite by a client the count does not see, as the service would.
    const carrying: DynamoClientLike = {
      async send(command, options) {
        try {
          return await raw.send(command as never, options);
        } catch (error) {
          const input = (command as { input?: { Key?: { pk: { S: string } }; Item?: { pk: { S: string } }; ReturnValuesOnConditionCheckFailure?: string } }).input;
          if ((error as Error).name === 'ConditionalCheckFailedException' && input?.ReturnValuesOnConditionCheckFailure === 'ALL_OLD') {
            const pk = (input.Key ?? input.Item)!.pk.S;
            Object.assign(error as object, { Item: await item(pk) });
          }
          throw error;
        }
      },
    };
    const client = counting(carrying);
    const store = dynamoStore({ client, table });
    const k = key();
    const owner = token(await store.claim(k, 60_000));
    client.sent.length = 0;
    const busy = await store.claim(k, 60_000);
    expect(busy).toMatchObject({ status: 'processing' });
    expect(busy.status === 'processing' && busy.retryAfterMs).toBeGreaterThan(55_000);
    expect(await store.complete(k, owner, 600_000)).toBe(true);
    expect(await store.claim(k, 60_000)).toEqual({ status: 'completed' });
    // A completion retried after it landed: answered from the old item too.
    expect(await store.complete(k, owner, 600_000)).toBe(true);
    expect(client.sent).toEqual(['PutItemCommand', 'UpdateItemCommand', 'PutItemCommand', 'UpdateItemCommand']);
  });

  it('writes pk, token, status, until (epoch ms) and ttl (epoch seconds, past the margin); a completion keeps its first end', async () => {
    const { now, pass } = clock(1_800_000_000_000);
    const store = open({ now });
    const k = key();
    const owner = token(await store.claim(k, 30_000.5));
    expect(await item(k)).toEqual({
      pk: { S: k },
      token: { S: owner },
      status: { S: 'lock' },
      until: { N: '1800000030001' },
      ttl: { N: String(Math.ceil((1_800_000_030_001 + 1000) / 1000)) },
    });
    expect(await store.complete(k, owner, 3_600_000)).toBe(true);
    expect(await item(k)).toMatchObject({ status: { S: 'done' }, until: { N: '1800003600000' }, ttl: { N: '1800003601' } });
    pass(1000);
    expect(await store.complete(k, owner, 3_600_000)).toBe(true);
    expect(await item(k)).toMatchObject({ until: { N: '1800003600000' } });
  });

  it('treats an item past its own end as absent, though TTL never deleted it', async () => {
    const { now, pass } = clock();
    const store = open({ now, clockMarginMs: 0 });
    const k = key();
    const owner = token(await store.claim(k, 60_000));
    expect(await store.complete(k, owner, 10_000)).toBe(true);
    pass(10_000);
    // The item is still there (dynalite never expires items; DynamoDB deletes them late).
    expect(await item(k)).toMatchObject({ status: { S: 'done' } });
    expect(await store.complete(k, owner, 10_000)).toBe(false);
    expect(await store.claim(k, 60_000)).toMatchObject({ status: 'acquired' });
  });

  it('tries again when the item it lost to vanishes before the read', async () => {
    const k = key();
    const holder = token(await open().claim(k, 60_000));
    // The holder releases between the failed write and the read.
    let releases = 0;
    const releasing: DynamoClientLike = {
      async send(command, options) {
        try {
          return await raw.send(command as never, options);
        } catch (error) {
          if ((error as Error).name === 'ConditionalCheckFailedException' && releases++ === 0) {
            await raw.send(new DeleteItemCommand({ TableName: table, Key: { pk: { S: k } } }));
          }
          throw error;
        }
      },
    };
    const result = await dynamoStore({ client: releasing, table }).claim(k, 60_000);
    expect(result.status).toBe('acquired');
    expect(releases).toBe(1);
    expect(await open().complete(k, holder, 60_000)).toBe(false);
  });

  it('gives exactly one of 100 concurrent claims of one key, through five clients', async () => {
    // A generous request bound: 100 claims at once queue up in dynalite on a loaded machine, and a
    // store timeout would answer 503 instead of the condition under test.
    const stores = Array.from({ length: 5 }, () => open({ timeoutMs: 30_000 }, dynalite.client()));
    const k = key();
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => stores[i % 5]!.claim(k, 60_000)));
    expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'processing')).toHaveLength(99);
  });

  it('pings with one read', async () => {
    const client = counting();
    await open({}, client).ping();
    expect(client.sent).toEqual(['GetItemCommand']);
  });
});

describe('dynamoStore clocks: lock ends on the caller’s clock, takeover a margin later', () => {
  /**
   * Client A holds a claim; client B's clock runs `skew` ms ahead. Step both clocks together
   * through the lock and past it; at each step B tries to claim. Returns whether B acquired while
   * A's lock had not yet ended on A's own clock (both handlers running), and when B acquired.
   */
  async function bothHeld(skew: number, margin: number): Promise<{ overlap: boolean; acquiredAt: number | undefined }> {
    const base = clock();
    const a = open({ now: base.now, clockMarginMs: margin }, dynalite.client());
    const b = open({ now: () => base.now() + skew, clockMarginMs: margin }, dynalite.client());
    const k = key();
    const lockMs = 1000;
    const start = base.now();
    const ownerA = token(await a.claim(k, lockMs));
    for (let step = 0; step <= (lockMs + margin + Math.abs(skew)) / 50 + 2; step++) {
      base.state.time = start + step * 50;
      const claimB = await b.claim(k, 60_000);
      if (claimB.status !== 'acquired') continue;
      // B holds it now. Does A still hold it too, by its own clock (its handler would still be
      // running)? The store's fencing then still refuses A's completion.
      const aStillHolds = base.now() < start + lockMs;
      expect(await a.complete(k, ownerA, 60_000)).toBe(false);
      return { overlap: aStillHolds, acquiredAt: step * 50 };
    }
    return { overlap: false, acquiredAt: undefined };
  }

  it('never lets two clients whose clocks differ by less than the margin both hold a claim', async () => {
    for (const skew of [0, 400, 950, -950]) {
      const { overlap, acquiredAt } = await bothHeld(skew, DEFAULT_DYNAMO_CLOCK_MARGIN_MS);
      expect({ skew, overlap }).toEqual({ skew, overlap: false });
      // B takes over once its clock is past the lock's end plus the margin, not before.
      expect(acquiredAt).toBeGreaterThanOrEqual(1000 + DEFAULT_DYNAMO_CLOCK_MARGIN_MS - skew);
      expect(acquiredAt).toBeLessThanOrEqual(1000 + DEFAULT_DYNAMO_CLOCK_MARGIN_MS - skew + 50);
    }
  });

  it('lets them both hold it when the clocks differ by more than the margin (what the margin is for)', async () => {
    const { overlap } = await bothHeld(1500, DEFAULT_DYNAMO_CLOCK_MARGIN_MS);
    expect(overlap).toBe(true);
  });

  it('answers processing with the time left to the owner’s end, then to the margin’s', async () => {
    const { now, pass } = clock();
    const store = open({ now });
    const k = key();
    token(await store.claim(k, 5000));
    expect(await store.claim(k, 5000)).toEqual({ status: 'processing', retryAfterMs: 5000 });
    pass(5200);
    expect(await store.claim(k, 5000)).toEqual({ status: 'processing', retryAfterMs: 800 });
    pass(800);
    expect(await store.claim(k, 5000)).toMatchObject({ status: 'acquired' });
  });
});

describe('dynamoStore unsigned slots', () => {
  it('keeps at most unsignedMax unsigned items, whatever arrives; signed ids are untouched', async () => {
    const { table: own, open: openOwn } = await dynalite.table();
    const store = openOwn({ unsignedMax: 4 });
    const signed = key('s');
    const signedOwner = token(await store.claim(signed, 600_000));
    const outcomes: string[] = [];
    for (let i = 0; i < 50; i++) {
      const k = `ns:u:flood_${i}`;
      try {
        const claim = await store.claim(k, 600_000);
        outcomes.push(claim.status);
        if (claim.status === 'acquired') expect(await store.complete(k, claim.token, 600_000)).toBe(true);
      } catch (error) {
        expect(error).toBeInstanceOf(StoreError);
        outcomes.push((error as StoreError).reason);
      }
    }
    // Completed unsigned ids give their slot to the next one: every claim acquired.
    expect(outcomes).toEqual(Array(50).fill('acquired'));
    const items = (await raw.send(new ScanCommand({ TableName: own, ConsistentRead: true }))).Items!;
    const pks = items.map((entry) => entry['pk']!.S!).sort();
    expect(pks.filter((pk) => pk.startsWith('u#')).length).toBeLessThanOrEqual(4);
    expect(pks.filter((pk) => !pk.startsWith('u#'))).toEqual([signed]);
    expect(await store.claim(signed, 60_000)).toMatchObject({ status: 'processing' });
    expect(await store.complete(signed, signedOwner, 600_000)).toBe(true);
  });

  it('refuses an unsigned id whose slot holds another’s live claim with StoreError unsigned_limit (503 UNSIGNED_LIMIT), as every store does', async () => {
    const { now, pass } = clock();
    const store = open({ unsignedMax: 1, now });
    const first = key('u');
    const second = key('u');
    const owner = token(await store.claim(first, 10_000));
    const refused = await store.claim(second, 10_000).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StoreError);
    expect(refused).toMatchObject({ store: 'dynamodb', reason: 'unsigned_limit' });
    expect((refused as Error).message).toBe(
      "dynamodb store: no room for another unsigned id (the unsigned slot u#0 holds another unsigned id's live claim; unsignedMax 1), so the claim was refused rather than evict a claim whose handler still runs",
    );
    // The same id is still told apart: busy, then completed.
    expect(await store.claim(first, 10_000)).toMatchObject({ status: 'processing' });
    // Another id's token cannot act on the slot.
    expect(await store.complete(second, owner, 10_000)).toBe(false);
    expect(await store.complete(first, owner, 60_000)).toBe(true);
    expect(await store.claim(first, 10_000)).toEqual({ status: 'completed' });
    // A completion gives way to the next unsigned id (the first is forgotten early, and refused
    // while the next one's claim lives); an expired lock gives way too.
    const next = token(await store.claim(second, 10_000));
    await expect(store.claim(first, 10_000)).rejects.toMatchObject({ reason: 'unsigned_limit' });
    pass(12_000);
    expect(await store.complete(second, next, 10_000)).toBe(false);
    expect(await store.claim(first, 10_000)).toMatchObject({ status: 'acquired' });
    pass(12_000);
    expect(await store.claim(second, 10_000)).toMatchObject({ status: 'acquired' });
  });
});

describe('dynamoStore setup', () => {
  it('creates a missing table on demand, and is safe to run again and concurrently', async () => {
    const name = `setup-${process.pid}-${Date.now()}`;
    const stores = [0, 1, 2].map(() => dynamoStore({ client: raw, table: name }));
    await Promise.all(stores.map((store) => store.setup()));
    await stores[0]!.setup();
    const k = key();
    expect(await stores[1]!.claim(k, 60_000)).toMatchObject({ status: 'acquired' });
  });

  it('refuses a table with another key schema', async () => {
    const name = `other-${process.pid}-${Date.now()}`;
    await raw.send(
      new CreateTableCommand({
        TableName: name,
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    await expect(dynamoStore({ client: raw, table: name }).setup()).rejects.toThrow(
      new TypeError(`dynamoStore table ${name} exists with another key schema: it needs a partition key named pk (string) and no sort key`),
    );
  });
});

describe('dynamoStore failures', () => {
  const servers: (Server | HttpServer)[] = [];
  const clients: DynamoDBClient[] = [];
  afterAll(async () => {
    for (const client of clients) client.destroy();
    for (const server of servers) {
      (server as HttpServer).closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  const clientOf = (endpoint: string, maxAttempts?: number): DynamoDBClient => {
    const client = new DynamoDBClient({ ...localConfig(endpoint), ...(maxAttempts === undefined ? {} : { maxAttempts }) });
    clients.push(client);
    return client;
  };

  /** Rejects or resolves, and how long it took. */
  async function timed<T>(promise: Promise<T>): Promise<{ error: unknown; ms: number }> {
    const started = Date.now();
    const error = await promise.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    return { error, ms: Date.now() - started };
  }

  it('rejects at once when nothing listens at the endpoint', async () => {
    const store = dynamoStore({ client: clientOf(`http://127.0.0.1:${await freePort()}`, 1), table: 'claims', timeoutMs: 5000 });
    const { error, ms } = await timed(store.claim(key(), 60_000));
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ code: 'ECONNREFUSED' });
    expect(ms).toBeLessThan(5000);
  });

  it('aborts a request that gets no answer after timeoutMs, the SDK’s retries included', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    servers.push(silent);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const client = clientOf(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`);
    // The SDK's own promise for each request, to see that the store's abort reached it.
    const requests: Promise<unknown>[] = [];
    const watched: DynamoClientLike = {
      send(command, options) {
        const request = client.send(command as never, options);
        requests.push(request);
        return request;
      },
    };
    const store = dynamoStore({ client: watched, table: 'claims', timeoutMs: 300 });
    const { error, ms } = await timed(store.claim(key(), 60_000));
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ store: 'dynamodb', reason: 'timeout', message: 'dynamodb store: no answer to claim within 300 ms' });
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(3000);
    expect(sockets.length).toBeGreaterThan(0);
    expect(requests).toHaveLength(1);
    await expect(requests[0]).rejects.toMatchObject({ name: 'AbortError' });
    for (const socket of sockets) socket.destroy();
  });

  it.each([
    ['ThrottlingException', 400],
    ['ProvisionedThroughputExceededException', 400],
    ['RequestLimitExceeded', 400],
    ['InternalServerError', 500],
  ])('rejects on %s (never a pass, never an answer), on every operation', async (type, status) => {
    const errors = createHttpServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(status, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': 'test' });
        response.end(JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${type}`, message: 'refused by the test endpoint' }));
      });
    });
    servers.push(errors);
    await new Promise<void>((resolve) => errors.listen(0, '127.0.0.1', resolve));
    const store = dynamoStore({ client: clientOf(`http://127.0.0.1:${(errors.address() as AddressInfo).port}`, 1), table: 'claims' });
    const k = key();
    for (const call of [() => store.claim(k, 60_000), () => store.complete(k, 'a-token', 60_000), () => store.release(k, 'a-token'), () => store.extend(k, 'a-token', 60_000), () => store.ping()]) {
      await expect(call()).rejects.toMatchObject({ name: type });
    }
  });
});
