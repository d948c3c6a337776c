/**
 * What a process of the capacity section (capacity.ts) asks of DynamoDB and SQS, counted from the
 * requests its SDK clients actually send: a wrapper around each client's `send`, given to the
 * package in place of the client. Both services bill by request, not by CPU: SQS per request, and
 * DynamoDB per write unit, so the "DynamoDB store + SQS inbox" shape reports these beside its CPU
 * time. Nothing is added to the requests (no `ReturnConsumedCapacity`): the store sends what it
 * sends in production.
 *
 * DynamoDB's write units follow AWS's published rules, applied to each write the store sends:
 *
 * - an item's size is the sum over its attributes of the attribute name's UTF-8 bytes plus the
 *   value's size: a string's UTF-8 bytes, a binary's raw bytes, 1 byte for a Boolean or a null,
 *   and for a number 1 byte per two significant digits (leading and trailing zeros trimmed) plus 1;
 * - a write costs 1 WCU per KB (1,024 bytes) of item, rounded up, at least 1: for `PutItem` the
 *   larger of the item it replaces and the new one, for `UpdateItem` the larger of the item before
 *   and after the update, for `DeleteItem` the item deleted;
 * - a write whose condition fails costs the same units as if it had applied (the larger of the
 *   item there and the one it would have written).
 *
 * The item before a write is known without reading it: each process writes a table of its own
 * (the receiver its claims, the worker its claims), so the wrapper keeps the items as its own
 * writes left them. Reads (`GetItem`) are counted too: 1 RCU per 4 KB for a consistent read, half
 * that for an eventually consistent one.
 */

import type { AwsClient } from '../src/lib/aws.ts';
import { isConditionFailure } from '../src/stores/dynamodb/items.ts';

/** An attribute value as the low-level DynamoDB client sends it (the store writes S and N only). */
interface AttributeValue {
  S?: string;
  N?: string;
  B?: Uint8Array;
  BOOL?: boolean;
  NULL?: boolean;
}
type Item = Record<string, AttributeValue>;

/** What one process asked of DynamoDB. */
export interface DynamoUsage {
  /** Requests sent, by operation (`PutItem`, `UpdateItem`, `GetItem`, …). */
  requests: Record<string, number>;
  /** Writes whose condition failed (answered `ConditionalCheckFailedException`): billed all the same. */
  conditionFailed: number;
  /** Write capacity units the writes consumed, by the rules above. */
  writeUnits: number;
  /** Read capacity units the reads consumed. */
  readUnits: number;
  /** The largest item a write was charged for, in bytes. */
  largestItemBytes: number;
}

/** What one process asked of SQS. */
export interface SqsUsage {
  /** Requests sent, by action (`SendMessage`, `ReceiveMessage`, `DeleteMessage`, …). */
  requests: Record<string, number>;
  /** The largest message body sent, in bytes (SQS bills each 64 KB of a payload as one request). */
  largestBodyBytes: number;
}

/** Both, as the capacity section's processes report them. */
export interface AwsUsage {
  dynamodb: DynamoUsage;
  sqs: SqsUsage;
}

export const emptyDynamoUsage = (): DynamoUsage => ({ requests: {}, conditionFailed: 0, writeUnits: 0, readUnits: 0, largestItemBytes: 0 });
const emptySqsUsage = (): SqsUsage => ({ requests: {}, largestBodyBytes: 0 });

/** A client's `send` as the package calls it. */
type Send = AwsClient['send'];

/** The operation a command object names: `PutItemCommand` → `PutItem`. */
function operationOf(command: object): string {
  return command.constructor.name.replace(/Command$/, '');
}

/** The input a command object was built with. */
function inputOf<T>(command: object): T {
  return (command as { input: T }).input;
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

/** A number's size: 1 byte per two significant digits, plus 1. */
function numberBytes(text: string): number {
  const digits = text
    .replace(/^[-+]/, '')
    .replace(/[eE][-+]?\d+$/, '')
    .replace('.', '')
    .replace(/^0+/, '')
    .replace(/0+$/, '');
  return Math.ceil(digits.length / 2) + 1;
}

/** An item's size in bytes, by AWS's rules for the attribute types the store writes. */
export function itemBytes(item: Item): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += utf8(name);
    if (value.S !== undefined) bytes += utf8(value.S);
    else if (value.N !== undefined) bytes += numberBytes(value.N);
    else if (value.B !== undefined) bytes += value.B.byteLength;
    else if (value.BOOL !== undefined || value.NULL !== undefined) bytes += 1;
    // A type this meter does not size (lists, maps, sets) would be counted wrong: say so.
    else throw new TypeError(`aws-usage: no size rule for the attribute ${name} (${Object.keys(value).join(', ')})`);
  }
  return bytes;
}

/** Write units for a write touching items of these sizes (0: no item). */
const writeUnitsOf = (...sizes: number[]) => Math.max(1, Math.ceil(Math.max(...sizes) / 1024));

/**
 * The item an `UpdateItem` leaves: `before` (or the key alone) with its `SET` assignments applied.
 * The store's updates are `SET #name = :value, …`; any other update expression is refused rather
 * than sized wrong.
 */
function updated(before: Item | undefined, input: { Key: Item; UpdateExpression?: string; ExpressionAttributeNames?: Record<string, string>; ExpressionAttributeValues?: Item }): Item {
  const after: Item = { ...(before ?? input.Key) };
  const expression = input.UpdateExpression ?? '';
  const set = /^\s*SET\s+(.+)$/i.exec(expression);
  if (set === null) throw new TypeError(`aws-usage: no size rule for the update ${JSON.stringify(expression)}`);
  for (const assignment of set[1]!.split(',')) {
    const match = /^\s*(#?\w+)\s*=\s*(:\w+)\s*$/.exec(assignment);
    if (match === null) throw new TypeError(`aws-usage: no size rule for the assignment ${JSON.stringify(assignment)}`);
    const name = match[1]!.startsWith('#') ? input.ExpressionAttributeNames?.[match[1]!] : match[1]!;
    const value = input.ExpressionAttributeValues?.[match[2]!];
    if (name === undefined || value === undefined) throw new TypeError(`aws-usage: the assignment ${JSON.stringify(assignment)} names no attribute or value`);
    after[name] = value;
  }
  return after;
}

/**
 * A DynamoDB client that counts what goes through it: requests by operation, the write units of
 * each `PutItem`, `UpdateItem` and `DeleteItem` (whether its condition held or not), and reads,
 * on a table keyed by `pk` (the store's).
 */
export function meteredDynamo(client: AwsClient): { client: AwsClient; usage(): DynamoUsage } {
  const usage = emptyDynamoUsage();
  /** The items this process's writes left, by table and key. */
  const items = new Map<string, Item>();
  const keyOf = (table: string, item: Item) => `${table}\u0000${JSON.stringify(item['pk'] ?? null)}`;
  const send: Send = async (command, options) => {
    const operation = operationOf(command);
    usage.requests[operation] = (usage.requests[operation] ?? 0) + 1;
    if (operation === 'GetItem') {
      const input = inputOf<{ ConsistentRead?: boolean }>(command);
      const reply = (await client.send(command, options)) as { Item?: Item } | undefined;
      const blocks = Math.max(1, Math.ceil((reply?.Item === undefined ? 0 : itemBytes(reply.Item)) / 4096));
      usage.readUnits += input.ConsistentRead === true ? blocks : blocks / 2;
      return reply;
    }
    if (operation !== 'PutItem' && operation !== 'UpdateItem' && operation !== 'DeleteItem') return client.send(command, options);
    const input = inputOf<{ TableName: string; Item?: Item; Key?: Item; UpdateExpression?: string; ExpressionAttributeNames?: Record<string, string>; ExpressionAttributeValues?: Item }>(command);
    const key = keyOf(input.TableName, operation === 'PutItem' ? input.Item! : input.Key!);
    const before = items.get(key);
    const after = operation === 'PutItem' ? input.Item! : operation === 'UpdateItem' ? updated(before, { ...input, Key: input.Key! }) : undefined;
    const sizes = [before === undefined ? 0 : itemBytes(before), after === undefined ? 0 : itemBytes(after)];
    // Charged whether the condition holds or not.
    usage.writeUnits += writeUnitsOf(...sizes);
    usage.largestItemBytes = Math.max(usage.largestItemBytes, ...sizes);
    try {
      const reply = await client.send(command, options);
      if (after === undefined) items.delete(key);
      else items.set(key, after);
      return reply;
    } catch (error) {
      if (isConditionFailure(error)) usage.conditionFailed++;
      throw error;
    }
  };
  return { client: { send }, usage: () => structuredClone(usage) };
}

/** An SQS client that counts the requests that go through it, by action. */
export function meteredSqs(client: AwsClient): { client: AwsClient; usage(): SqsUsage } {
  const usage = emptySqsUsage();
  const send: Send = (command, options) => {
    const action = operationOf(command);
    usage.requests[action] = (usage.requests[action] ?? 0) + 1;
    if (action === 'SendMessage') usage.largestBodyBytes = Math.max(usage.largestBodyBytes, utf8(inputOf<{ MessageBody?: string }>(command).MessageBody ?? ''));
    return client.send(command, options);
  };
  return { client: { send }, usage: () => structuredClone(usage) };
}

/** What was asked between two readings of one process's usage (`before` earlier). */
export function usageBetween(before: AwsUsage, after: AwsUsage): AwsUsage {
  const requests = (a: Record<string, number>, b: Record<string, number>) => Object.fromEntries(Object.entries(b).map(([name, n]) => [name, n - (a[name] ?? 0)]).filter(([, n]) => n !== 0));
  return {
    dynamodb: {
      requests: requests(before.dynamodb.requests, after.dynamodb.requests),
      conditionFailed: after.dynamodb.conditionFailed - before.dynamodb.conditionFailed,
      writeUnits: after.dynamodb.writeUnits - before.dynamodb.writeUnits,
      readUnits: after.dynamodb.readUnits - before.dynamodb.readUnits,
      largestItemBytes: after.dynamodb.largestItemBytes,
    },
    sqs: { requests: requests(before.sqs.requests, after.sqs.requests), largestBodyBytes: after.sqs.largestBodyBytes },
  };
}

/** `usage` divided by `deliveries`: counts per delivery (the largest item and body stay as they are). */
export function perDelivery(usage: AwsUsage, deliveries: number): AwsUsage {
  const each = (requests: Record<string, number>) => Object.fromEntries(Object.entries(requests).map(([name, n]) => [name, n / deliveries]));
  return {
    dynamodb: {
      requests: each(usage.dynamodb.requests),
      conditionFailed: usage.dynamodb.conditionFailed / deliveries,
      writeUnits: usage.dynamodb.writeUnits / deliveries,
      readUnits: usage.dynamodb.readUnits / deliveries,
      largestItemBytes: usage.dynamodb.largestItemBytes,
    },
    sqs: { requests: each(usage.sqs.requests), largestBodyBytes: usage.sqs.largestBodyBytes },
  };
}

/** Two processes' usage together. */
export function combined(a: AwsUsage, b: AwsUsage): AwsUsage {
  const add = (x: Record<string, number>, y: Record<string, number>) => {
    const total = { ...x };
    for (const [name, n] of Object.entries(y)) total[name] = (total[name] ?? 0) + n;
    return total;
  };
  return {
    dynamodb: {
      requests: add(a.dynamodb.requests, b.dynamodb.requests),
      conditionFailed: a.dynamodb.conditionFailed + b.dynamodb.conditionFailed,
      writeUnits: a.dynamodb.writeUnits + b.dynamodb.writeUnits,
      readUnits: a.dynamodb.readUnits + b.dynamodb.readUnits,
      largestItemBytes: Math.max(a.dynamodb.largestItemBytes, b.dynamodb.largestItemBytes),
    },
    sqs: { requests: add(a.sqs.requests, b.sqs.requests), largestBodyBytes: Math.max(a.sqs.largestBodyBytes, b.sqs.largestBodyBytes) },
  };
}
