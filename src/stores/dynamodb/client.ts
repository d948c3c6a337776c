/**
 * The DynamoDB client the store accepts, by shape, and the SDK's command classes it sends,
 * loaded from the application's own SDK.
 */

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

// The command classes, from the application's own SDK, loaded on first use. A string literal, so
// an application's bundler sees it; never bundled into this package (tsdown's neverBundle).
type CommandClass = new (input: object) => object;
export interface Commands {
  PutItemCommand: CommandClass;
  UpdateItemCommand: CommandClass;
  DeleteItemCommand: CommandClass;
  GetItemCommand: CommandClass;
  DescribeTableCommand: CommandClass;
  CreateTableCommand: CommandClass;
}
let commands: Promise<Commands> | undefined;
export function loadCommands(): Promise<Commands> {
  commands ??= import('@aws-sdk/client-dynamodb').then(
    (sdk) => sdk as unknown as Commands,
    (error: unknown) => {
      commands = undefined;
      throw new Error('dynamoStore needs @aws-sdk/client-dynamodb (v3) installed beside the client it was given', { cause: error });
    },
  );
  return commands;
}
