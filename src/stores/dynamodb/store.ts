/** The DynamoDB store: its operations, each one conditional write. */

import { checkClaim, checkComplete, checkExtend, checkRelease, checkTimeoutOption, describeValue, fnv1a, isUnsignedKey, newToken, unsignedLimitError, withTimeout } from '../internal.ts';
import { StoreError, type ClaimResult } from '../types.ts';
import { loadCommands, type Commands, type DynamoClientLike } from './client.ts';
import { isConditionFailure, itemOnFailure, N, readHeld, S, ttlSeconds, type Held, type Item } from './items.ts';
import { DEFAULT_DYNAMO_CLOCK_MARGIN_MS, DEFAULT_DYNAMO_TIMEOUT_MS, DEFAULT_DYNAMO_UNSIGNED_MAX, type DynamoStore, type DynamoStoreOptions } from './options.ts';
import { checkTable, setupTable } from './table.ts';

/** How many times a claim tries again when the item it lost to vanished or expired meanwhile. */
const CLAIM_ATTEMPTS = 3;

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
    setup: () => setupTable(send, table),
  };
}
