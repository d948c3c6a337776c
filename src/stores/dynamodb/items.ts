/** The items the DynamoDB store writes, and how it reads them and the service's failures. */

import { StoreError } from '../types.ts';

/** A DynamoDB attribute value, as the low-level client sends and returns it. */
type Attribute = { S: string } | { N: string };
export type Item = Record<string, Attribute>;

/** What the store reads from an item it wrote. */
export interface Held {
  status: 'lock' | 'done';
  /** The lock's or the completion's end, epoch ms on the writer's clock. */
  until: number;
  token: string;
  /** Unsigned slots: the key that holds the slot. */
  key: string | undefined;
}

/** A string attribute, and a number attribute (DynamoDB sends numbers as text). */
export const S = (value: string): Attribute => ({ S: value });
export const N = (value: number): Attribute => ({ N: String(value) });

/** An error's `name`, as the SDK sets it from the service's error type. */
export function errorName(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && typeof (error as { name?: unknown }).name === 'string' ? (error as { name: string }).name : undefined;
}

/** The one failure that is an answer: the condition did not hold. Everything else rejects. */
export const isConditionFailure = (error: unknown): boolean => errorName(error) === 'ConditionalCheckFailedException';

/** The old item a failed condition returned (DynamoDB does; dynalite does not). */
export function itemOnFailure(error: unknown): Item | undefined {
  const item = (error as { Item?: unknown }).Item;
  return typeof item === 'object' && item !== null ? (item as Item) : undefined;
}

/** An item the store wrote, read back; anything else is a `bad_reply`. */
export function readHeld(item: Item): Held {
  const status = (item['status'] as { S?: unknown } | undefined)?.S;
  const until = Number((item['until'] as { N?: unknown } | undefined)?.N);
  const token = (item['token'] as { S?: unknown } | undefined)?.S;
  const key = (item['key'] as { S?: unknown } | undefined)?.S;
  if ((status !== 'lock' && status !== 'done') || !Number.isFinite(until) || typeof token !== 'string') {
    throw new StoreError('dynamodb', 'bad_reply', 'dynamodb store: the table holds an item this store did not write (is the table shared with something else?)');
  }
  return { status, until, token, key: typeof key === 'string' ? key : undefined };
}

/** Epoch seconds for DynamoDB's TTL: never before the item stops counting for any caller. */
export const ttlSeconds = (until: number, margin: number): number => Math.ceil((until + margin) / 1000);
