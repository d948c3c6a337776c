/** The DynamoDB store's options, its type, and its defaults. */

import { DEFAULT_UNSIGNED_MAX, type IdempotencyStore } from '../types.ts';
import type { DynamoClientLike } from './client.ts';

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
