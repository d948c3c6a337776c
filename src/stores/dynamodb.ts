/**
 * The DynamoDB idempotency store: `webhook-receiver/dynamodb`.
 *
 * One table, one item per key, partition key `pk`. Every operation is one conditional write whose
 * condition says "absent or expired" (claim) or "held by this token" (complete, release, extend):
 * atomic without transactions, one request. A failed condition is an answer, not an error: the
 * claim then needs the old item to tell `processing` from `completed`, which DynamoDB returns with
 * the failure (`ReturnValuesOnConditionCheckFailure`, no read units) and emulators such as
 * dynalite do not; without it, one consistent `GetItem` reads it.
 *
 * DynamoDB has no server clock in conditions: times come from the caller's clock, and a lock
 * counts as expired for other callers only `clockMarginMs` after its end, while its owner stops
 * at the end itself. Two callers whose clocks differ by less than the margin never both hold a
 * claim.
 *
 * The client is the application's low-level `DynamoDBClient` (`@aws-sdk/client-dynamodb`), typed by
 * shape; the SDK's command classes are imported on first use, never bundled.
 *
 * @module webhook-receiver/dynamodb
 */

import { checkClaim, checkComplete, checkExtend, checkRelease, checkTimeoutOption, describeValue, fnv1a, isUnsignedKey, newToken, unsignedLimitError, withTimeout } from './internal.ts';
import { DEFAULT_UNSIGNED_MAX, StoreError, type ClaimResult, type IdempotencyStore } from './types.ts';

export { StoreError, type StoreErrorReason } from './types.ts';

/**
 * The part of a `DynamoDBClient` from `@aws-sdk/client-dynamodb` (v3) that {@link dynamoStore}
 * uses: `send(command, { abortSignal })`. Declared here so that neither the package nor its types
 * need the SDK installed.
 *
 * @example
 * ```ts
 * import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
 * import type { DynamoClientLike } from 'webhook-receiver/dynamodb';
 * const client: DynamoClientLike = new DynamoDBClient({ maxAttempts: 2 });
 * ```
 */
export interface DynamoClientLike {
  /** Sends one command; the store passes an `abortSignal` that bounds each request (`timeoutMs`). */
  send(command: object, options?: { abortSignal?: AbortSignal }): Promise<unknown>;
}

/**
 * Options of {@link dynamoStore}.
 *
 * @example
 * ```ts
 * import type { DynamoStoreOptions } from 'webhook-receiver/dynamodb';
 * const options: DynamoStoreOptions = { client, table: 'webhook-claims', timeoutMs: 1000 };
 * ```
 */
export interface DynamoStoreOptions {
  /** The app's low-level `DynamoDBClient`. The store never configures or destroys it. */
  client: DynamoClientLike;
  /** The table: partition key `pk` (string), nothing else (see {@link dynamoTableDefinition}). */
  table: string;
  /**
   * How long one request may take, the SDK's own retries included, before it is aborted and the
   * operation rejects with `StoreError` `timeout` (the receiver then answers 503
   * `STORE_UNAVAILABLE`). Default 2000.
   */
  timeoutMs?: number;
  /**
   * How far apart the clocks of the app's instances may be, in milliseconds: a lock counts as
   * expired for other callers only this long after its end. Default 1000.
   */
  clockMarginMs?: number;
  /**
   * How many unsigned ids the table holds at most: they live in this many slots of their own
   * (`u#` and a hash of the key), apart from signed ids. Default 10 000.
   */
  unsignedMax?: number;
  /** The clock, in epoch milliseconds (tests). Default `Date.now`. */
  now?: () => number;
}

/**
 * The DynamoDB store: {@link IdempotencyStore} with lease renewal, a readiness check and set-up.
 *
 * @example
 * ```ts
 * import { dynamoStore, type DynamoStore } from 'webhook-receiver/dynamodb';
 * const store: DynamoStore = dynamoStore({ client, table: 'webhook-claims' });
 * await store.ping();
 * ```
 */
export interface DynamoStore extends IdempotencyStore {
  extend(key: string, token: string, lockMs: number): Promise<boolean>;
  /** One eventually consistent `GetItem` (0.5 read units): resolves when the table answers. */
  ping(): Promise<void>;
  /**
   * Creates the table (on-demand, `PAY_PER_REQUEST`) when it is missing and waits until it is
   * active; checks the key schema of a table that exists. Does not turn on TTL (see the guide).
   */
  setup(): Promise<void>;
}

/**
 * 2000 ms: the default per-request timeout of {@link dynamoStore}.
 *
 * @example
 * ```ts
 * import { DEFAULT_DYNAMO_TIMEOUT_MS, dynamoStore } from 'webhook-receiver/dynamodb';
 * const store = dynamoStore({ client, table: 'webhook-claims', timeoutMs: DEFAULT_DYNAMO_TIMEOUT_MS / 2 });
 * ```
 */
export const DEFAULT_DYNAMO_TIMEOUT_MS = 2000;

/**
 * 1000 ms: the default clock margin of {@link dynamoStore}. Hosts on AWS keep their clocks within
 * about a millisecond of each other (Amazon Time Sync); hosts on plain NTP within tens of
 * milliseconds. A second covers a badly synchronised host many times over, and costs only a
 * second more before a crashed handler's delivery can run again, against locks of a minute.
 *
 * @example
 * ```ts
 * import { DEFAULT_DYNAMO_CLOCK_MARGIN_MS, dynamoStore } from 'webhook-receiver/dynamodb';
 * const store = dynamoStore({ client, table: 'webhook-claims', clockMarginMs: 5 * DEFAULT_DYNAMO_CLOCK_MARGIN_MS });
 * ```
 */
export const DEFAULT_DYNAMO_CLOCK_MARGIN_MS = 1000;

/**
 * 10 000: the default number of unsigned slots of {@link dynamoStore}, as the memory store's
 * `unsignedMax`.
 *
 * @example
 * ```ts
 * import { DEFAULT_DYNAMO_UNSIGNED_MAX, dynamoStore } from 'webhook-receiver/dynamodb';
 * const store = dynamoStore({ client, table: 'webhook-claims', unsignedMax: DEFAULT_DYNAMO_UNSIGNED_MAX / 10 });
 * ```
 */
export const DEFAULT_DYNAMO_UNSIGNED_MAX = DEFAULT_UNSIGNED_MAX;

/**
 * `'ttl'`: the attribute holding each item's expiry in epoch seconds, to name when turning on
 * DynamoDB's TTL for the table.
 *
 * @example
 * ```ts
 * import { UpdateTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
 * import { DYNAMO_TTL_ATTRIBUTE } from 'webhook-receiver/dynamodb';
 * await client.send(new UpdateTimeToLiveCommand({ TableName: 'webhook-claims', TimeToLiveSpecification: { AttributeName: DYNAMO_TTL_ATTRIBUTE, Enabled: true } }));
 * ```
 */
export const DYNAMO_TTL_ATTRIBUTE = 'ttl';

/**
 * What `CreateTable` takes for the store's table (what {@link DynamoStore.setup} sends): partition
 * key `pk` of type string, on-demand billing.
 *
 * @example
 * ```ts
 * import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
 * import { dynamoTableDefinition } from 'webhook-receiver/dynamodb';
 * await client.send(new CreateTableCommand(dynamoTableDefinition('webhook-claims')));
 * ```
 */
export function dynamoTableDefinition(table: string): {
  TableName: string;
  AttributeDefinitions: { AttributeName: string; AttributeType: 'S' }[];
  KeySchema: { AttributeName: string; KeyType: 'HASH' }[];
  BillingMode: 'PAY_PER_REQUEST';
} {
  checkTable(table);
  return {
    TableName: table,
    AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  };
}

/** DynamoDB's own rule for table names. */
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;

function checkTable(table: string): void {
  if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
    throw new TypeError(`dynamoStore table must be a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -), got ${typeof table === 'string' ? JSON.stringify(table) : describeValue(table)}`);
  }
}

// The command classes, from the application's own SDK, loaded on first use. A string literal, so
// an application's bundler sees it; never bundled into this package (tsdown's neverBundle).
type CommandClass = new (input: object) => object;
interface Commands {
  PutItemCommand: CommandClass;
  UpdateItemCommand: CommandClass;
  DeleteItemCommand: CommandClass;
  GetItemCommand: CommandClass;
  DescribeTableCommand: CommandClass;
  CreateTableCommand: CommandClass;
}
let commands: Promise<Commands> | undefined;
function loadCommands(): Promise<Commands> {
  commands ??= import('@aws-sdk/client-dynamodb').then(
    (sdk) => sdk as unknown as Commands,
    (error: unknown) => {
      commands = undefined;
      throw new Error('dynamoStore needs @aws-sdk/client-dynamodb (v3) installed beside the client it was given', { cause: error });
    },
  );
  return commands;
}

/** A DynamoDB attribute value, as the low-level client sends and returns it. */
type Attribute = { S: string } | { N: string };
type Item = Record<string, Attribute>;

/** What the store reads from an item it wrote. */
interface Held {
  status: 'lock' | 'done';
  /** The lock's or the completion's end, epoch ms on the writer's clock. */
  until: number;
  token: string;
  /** Unsigned slots: the key that holds the slot. */
  key: string | undefined;
}

const S = (value: string): Attribute => ({ S: value });
const N = (value: number): Attribute => ({ N: String(value) });

/** An error's `name`, as the SDK sets it from the service's error type. */
function errorName(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && typeof (error as { name?: unknown }).name === 'string' ? (error as { name: string }).name : undefined;
}

/** The one failure that is an answer: the condition did not hold. Everything else rejects. */
const isConditionFailure = (error: unknown): boolean => errorName(error) === 'ConditionalCheckFailedException';

/** The old item a failed condition returned (DynamoDB does; dynalite does not). */
function itemOnFailure(error: unknown): Item | undefined {
  const item = (error as { Item?: unknown }).Item;
  return typeof item === 'object' && item !== null ? (item as Item) : undefined;
}

function readHeld(item: Item): Held {
  const status = (item['status'] as { S?: unknown } | undefined)?.S;
  const until = Number((item['until'] as { N?: unknown } | undefined)?.N);
  const token = (item['token'] as { S?: unknown } | undefined)?.S;
  const key = (item['key'] as { S?: unknown } | undefined)?.S;
  if ((status !== 'lock' && status !== 'done') || !Number.isFinite(until) || typeof token !== 'string') {
    throw new StoreError('dynamodb', 'bad_reply', 'dynamodb store: the table holds an item this store did not write (is the table shared with something else?)');
  }
  return { status, until, token, key: typeof key === 'string' ? key : undefined };
}

/** How many times a claim tries again when the item it lost to vanished or expired meanwhile. */
const CLAIM_ATTEMPTS = 3;

/** Epoch seconds for DynamoDB's TTL: never before the item stops counting for any caller. */
const ttlSeconds = (until: number, margin: number): number => Math.ceil((until + margin) / 1000);

/**
 * An idempotency store in a DynamoDB table, shared by every Lambda container (or any instance) of
 * an app: a `webhook-id` is processed once however many receive it.
 *
 * Each claim, complete, release and extend is one conditional write. What each costs, for items
 * under 1 KB (they are about 100 bytes), on-demand or provisioned alike:
 * - a first delivery: claim 1 write unit, complete 1: 2 write units, as Powertools for AWS
 *   Lambda's idempotency (about 2 write units per first call);
 * - a duplicate or a busy id: the claim's failed write, 1 write unit (DynamoDB returns the old
 *   item with the failure, no read units); 1 write unit and 1 read unit (a consistent `GetItem`)
 *   where the failure does not carry the item (dynalite);
 * - release, extend: 1 write unit each; a complete retried after it landed, 1 write and 1 read.
 *
 * Times come from the caller's clock (`now`): a lock counts as expired for other callers
 * `clockMarginMs` after its end, so instances whose clocks differ by less than the margin never
 * both hold a claim. Items carry `ttl` (epoch seconds) for DynamoDB's TTL, which deletes late (up
 * to days); every condition treats an item past its own end as absent, deleted or not.
 *
 * Unsigned ids live in `unsignedMax` slots of their own (`u#` and a hash of the key): at most that
 * many unsigned items, whatever arrives. An unsigned id whose slot holds another unsigned id's
 * completion takes the slot over (that id is forgotten early); one whose slot holds another's live
 * claim is refused with `StoreError` `full` (503). Signed ids never share their space.
 *
 * Throttling, service errors, network errors and timeouts reject (the receiver answers 503
 * `STORE_UNAVAILABLE` with `Retry-After`); a failed condition never does. Every request is aborted
 * after `timeoutMs`, the SDK's own retries included: give the client `maxAttempts: 2` so that a
 * retry fits within it.
 *
 * @example
 * ```ts
 * import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
 * import { createReceiver } from 'webhook-receiver';
 * import { dynamoStore } from 'webhook-receiver/dynamodb';
 *
 * const client = new DynamoDBClient({ maxAttempts: 2 });
 * const receiver = createReceiver({
 *   secrets: process.env.WEBHOOK_SECRET!,
 *   idempotency: { store: dynamoStore({ client, table: process.env.CLAIMS_TABLE! }) },
 * });
 * ```
 */
export function dynamoStore(options: DynamoStoreOptions): DynamoStore {
  if (typeof options !== 'object' || options === null) throw new TypeError('dynamoStore needs an options object: dynamoStore({ client, table })');
  const { client, table } = options;
  if (typeof (client as Partial<DynamoClientLike> | null | undefined)?.send !== 'function') {
    throw new TypeError(`dynamoStore client must be a DynamoDBClient from @aws-sdk/client-dynamodb: ${describeValue(client)} has no send()`);
  }
  checkTable(table);
  const timeoutMs = checkTimeoutOption('dynamo', options.timeoutMs, DEFAULT_DYNAMO_TIMEOUT_MS);
  const margin = options.clockMarginMs ?? DEFAULT_DYNAMO_CLOCK_MARGIN_MS;
  if (typeof margin !== 'number' || !Number.isSafeInteger(margin) || margin < 0) {
    throw new RangeError(`dynamoStore clockMarginMs must be a whole number of milliseconds, 0 or more (default ${DEFAULT_DYNAMO_CLOCK_MARGIN_MS})`);
  }
  const unsignedMax = options.unsignedMax ?? DEFAULT_DYNAMO_UNSIGNED_MAX;
  if (!Number.isSafeInteger(unsignedMax) || unsignedMax < 1) throw new RangeError('dynamoStore unsignedMax must be a positive whole number of ids');
  const now = options.now ?? Date.now;
  if (typeof now !== 'function') throw new TypeError('dynamoStore now must be a function returning epoch milliseconds');

  /** One request, aborted (and rejected with `timeout`) after `timeoutMs`. */
  const send = async (operation: string, make: (sdk: Commands) => object): Promise<unknown> => {
    const controller = new AbortController();
    const request = loadCommands().then((sdk) => client.send(make(sdk), { abortSignal: controller.signal }));
    try {
      return await withTimeout(request, timeoutMs, 'dynamodb', operation);
    } catch (error) {
      if (error instanceof StoreError && error.reason === 'timeout') controller.abort();
      throw error;
    }
  };

  /**
   * One conditional write: `true` when it applied, `false` when its condition failed (with the
   * old item when the service returned it). Any other failure rejects.
   */
  const write = async (operation: string, make: (sdk: Commands) => object): Promise<{ applied: true } | { applied: false; old: Item | undefined }> => {
    try {
      await send(operation, make);
      return { applied: true };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      return { applied: false, old: itemOnFailure(error) };
    }
  };

  /** The item under `pk`, read consistently (1 read unit). */
  const read = async (operation: string, pk: string): Promise<Held | undefined> => {
    const reply = (await send(operation, (sdk) => new sdk.GetItemCommand({ TableName: table, Key: { pk: S(pk) }, ConsistentRead: true }))) as { Item?: Item } | undefined;
    return reply?.Item === undefined ? undefined : readHeld(reply.Item);
  };

  /** Where a key's item lives: the key itself, or its unsigned slot (the key then kept in `key`). */
  const locate = (key: string): { pk: string; unsigned: boolean } =>
    isUnsignedKey(key) ? { pk: `u#${fnv1a(key) % unsignedMax}`, unsigned: true } : { pk: key, unsigned: false };

  /**
   * A write fenced by `token`: the item must be this token's, (for unsigned slots) this key's, and
   * not past its end on the caller's clock; `lockOnly` also requires a live lock, not a completion.
   */
  const fenced = (key: string, token: string, time: number, lockOnly: boolean) => {
    const { pk, unsigned } = locate(key);
    const names: Record<string, string> = { '#token': 'token', '#until': 'until' };
    const values: Item = { ':token': S(token), ':now': N(time) };
    let condition = '#token = :token AND #until > :now';
    if (lockOnly) {
      names['#status'] = 'status';
      values[':lock'] = S('lock');
      condition += ' AND #status = :lock';
    }
    if (unsigned) {
      names['#key'] = 'key';
      values[':key'] = S(key);
      condition += ' AND #key = :key';
    }
    return { pk, names, values, condition };
  };

  return {
    name: 'dynamodb',
    async claim(key, lockMs): Promise<ClaimResult> {
      checkClaim(key, lockMs);
      const { pk, unsigned } = locate(key);
      for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
        const time = now();
        const token = newToken();
        const until = Math.ceil(time + lockMs);
        const item: Item = { pk: S(pk), token: S(token), status: S('lock'), until: N(until), ttl: N(ttlSeconds(until, margin)) };
        // Absent, or past its end plus the margin (whatever TTL has deleted); an unsigned slot may
        // also be taken from another key's completion.
        let condition = 'attribute_not_exists(#pk) OR #until <= :free';
        const names: Record<string, string> = { '#pk': 'pk', '#until': 'until' };
        const values: Item = { ':free': N(time - margin) };
        if (unsigned) {
          item['key'] = S(key);
          condition += ' OR (#status = :done AND #key <> :key)';
          names['#status'] = 'status';
          names['#key'] = 'key';
          values[':done'] = S('done');
          values[':key'] = S(key);
        }
        const outcome = await write(
          'claim',
          (sdk) =>
            new sdk.PutItemCommand({
              TableName: table,
              Item: item,
              ConditionExpression: condition,
              ExpressionAttributeNames: names,
              ExpressionAttributeValues: values,
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            }),
        );
        if (outcome.applied) return { status: 'acquired', token };
        const old = outcome.old !== undefined ? readHeld(outcome.old) : await read('claim', pk);
        const seen = now();
        // Gone (released, deleted) or expired since the write: try again.
        if (old === undefined || old.until <= seen - margin) continue;
        if (unsigned && old.key !== key) {
          // Another key's lock became a completion since the write: the slot can be taken now.
          if (old.status === 'done') continue;
          throw unsignedLimitError('dynamodb', unsignedMax, `the unsigned slot ${pk} holds another unsigned id's live claim`);
        }
        if (old.status === 'done') return { status: 'completed' };
        // The owner holds the lock until `until`; others may take it over `margin` later.
        return { status: 'processing', retryAfterMs: Math.max(1, old.until > seen ? old.until - seen : old.until + margin - seen) };
      }
      // The item kept changing under us: answer busy, and the sender retries.
      return { status: 'processing' };
    },
    async complete(key, token, ttlMs) {
      checkComplete(key, token, ttlMs);
      const time = now();
      const { pk, names, values, condition } = fenced(key, token, time, true);
      const until = Math.ceil(time + ttlMs);
      names['#status'] = 'status';
      names['#ttl'] = 'ttl';
      values[':done'] = S('done');
      values[':until'] = N(until);
      values[':ttl'] = N(ttlSeconds(until, margin));
      const outcome = await write(
        'complete',
        (sdk) =>
          new sdk.UpdateItemCommand({
            TableName: table,
            Key: { pk: S(pk) },
            UpdateExpression: 'SET #status = :done, #until = :until, #ttl = :ttl',
            ConditionExpression: condition,
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: values,
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
      );
      if (outcome.applied) return true;
      // Idempotent for its own token: a completion that already landed (retried after a timeout)
      // answers true, and keeps its first end.
      const old = outcome.old !== undefined ? readHeld(outcome.old) : await read('complete', pk);
      return old !== undefined && old.token === token && old.status === 'done' && old.until > time && (old.key === undefined || old.key === key);
    },
    async release(key, token) {
      checkRelease(key, token);
      const { pk, names, values, condition } = fenced(key, token, now(), true);
      const outcome = await write(
        'release',
        (sdk) =>
          new sdk.DeleteItemCommand({ TableName: table, Key: { pk: S(pk) }, ConditionExpression: condition, ExpressionAttributeNames: names, ExpressionAttributeValues: values }),
      );
      return outcome.applied;
    },
    async extend(key, token, lockMs) {
      checkExtend(key, token, lockMs);
      const time = now();
      const { pk, names, values, condition } = fenced(key, token, time, true);
      const until = Math.ceil(time + lockMs);
      names['#ttl'] = 'ttl';
      values[':until'] = N(until);
      values[':ttl'] = N(ttlSeconds(until, margin));
      const outcome = await write(
        'extend',
        (sdk) =>
          new sdk.UpdateItemCommand({
            TableName: table,
            Key: { pk: S(pk) },
            UpdateExpression: 'SET #until = :until, #ttl = :ttl',
            ConditionExpression: condition,
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: values,
          }),
      );
      return outcome.applied;
    },
    async ping() {
      // A key no receiver writes (it has no `:`): one eventually consistent read, 0.5 read units.
      await send('ping', (sdk) => new sdk.GetItemCommand({ TableName: table, Key: { pk: S('ping') }, ProjectionExpression: '#pk', ExpressionAttributeNames: { '#pk': 'pk' } }));
    },
    async setup() {
      const describe = async (): Promise<{ TableStatus?: string; KeySchema?: { AttributeName?: string; KeyType?: string }[] } | undefined> => {
        try {
          const reply = (await send('setup', (sdk) => new sdk.DescribeTableCommand({ TableName: table }))) as { Table?: { TableStatus?: string; KeySchema?: { AttributeName?: string; KeyType?: string }[] } };
          return reply.Table;
        } catch (error) {
          if (errorName(error) === 'ResourceNotFoundException') return undefined;
          throw error;
        }
      };
      let found = await describe();
      if (found === undefined) {
        try {
          await send('setup', (sdk) => new sdk.CreateTableCommand(dynamoTableDefinition(table)));
        } catch (error) {
          // Another instance created it at the same time.
          if (errorName(error) !== 'ResourceInUseException') throw error;
        }
        found = await describe();
      }
      // A new table takes seconds to become active; poll for up to a few minutes, never forever.
      for (let polls = 0; found?.TableStatus !== 'ACTIVE' && polls < SETUP_POLLS; polls++) {
        await new Promise((resolve) => setTimeout(resolve, SETUP_POLL_MS));
        found = await describe();
      }
      if (found?.TableStatus !== 'ACTIVE') throw new StoreError('dynamodb', 'timeout', `dynamodb store: table ${table} did not become active within ${(SETUP_POLLS * SETUP_POLL_MS) / 1000} s`);
      const schema = found.KeySchema ?? [];
      if (schema.length !== 1 || schema[0]?.AttributeName !== 'pk' || schema[0]?.KeyType !== 'HASH') {
        throw new TypeError(`dynamoStore table ${table} exists with another key schema: it needs a partition key named pk (string) and no sort key`);
      }
    },
  };
}

const SETUP_POLL_MS = 1000;
const SETUP_POLLS = 180;
