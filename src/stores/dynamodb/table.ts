/** The DynamoDB store's table: its definition, its name's check, and its set-up. */

import { describeValue } from '../internal.ts';
import { StoreError } from '../types.ts';
import type { Commands } from './client.ts';
import { errorName } from './items.ts';

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

export function checkTable(table: string): void {
  if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
    throw new TypeError(`dynamoStore table must be a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -), got ${typeof table === 'string' ? JSON.stringify(table) : describeValue(table)}`);
  }
}

/** How often, and how many times, set-up asks whether a new table is active: three minutes at most. */
const SETUP_POLL_MS = 1000;
const SETUP_POLLS = 180;

/** One request of the store, bounded by its timeout. */
type Send = (operation: string, make: (sdk: Commands) => object) => Promise<unknown>;

/**
 * Creates the table when it is missing and waits until it is active; checks the key schema of a
 * table that exists (what {@link DynamoStore.setup} does).
 */
export async function setupTable(send: Send, table: string): Promise<void> {
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
}
