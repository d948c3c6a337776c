/**
 * The DynamoDB client the store accepts, by shape, and the SDK's command classes it sends,
 * loaded from the application's own SDK.
 */

import { commandLoader, type CommandClass } from '../../lib/aws.ts';

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

/** The command classes the store sends, from the application's own SDK, loaded on first use. */
export interface Commands {
  PutItemCommand: CommandClass;
  UpdateItemCommand: CommandClass;
  DeleteItemCommand: CommandClass;
  GetItemCommand: CommandClass;
  DescribeTableCommand: CommandClass;
  CreateTableCommand: CommandClass;
}

export const loadCommands = commandLoader<Commands>(() => import('@aws-sdk/client-dynamodb'), 'dynamoStore needs @aws-sdk/client-dynamodb (v3) installed beside the client it was given');
