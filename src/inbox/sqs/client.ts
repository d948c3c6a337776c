/**
 * The SQS client as the inbox sees it: the application's `SQSClient` (typed by the one method the
 * inbox calls, so neither the package nor its types need the SDK), the command classes loaded
 * from the application's own `@aws-sdk/client-sqs` on first use (an SDK client only sends its own
 * command objects), and one request bounded by a timeout that aborts it.
 */

import { commandLoader, sendCommand, type CommandClass } from '../../lib/aws.ts';

/**
 * The part of an `SQSClient` (from `@aws-sdk/client-sqs` v3) the inbox uses:
 * `send(command, { abortSignal })`. Declared here so that neither the package nor its types need
 * the SDK; the command classes come from the application's own copy of it.
 *
 * @example
 * ```ts
 * import { SQSClient } from '@aws-sdk/client-sqs';
 * const client: SqsClientLike = new SQSClient({ region: 'eu-west-1' });
 * ```
 */
export interface SqsClientLike {
  /** Sends one command; resolves with the service's answer. */
  send(command: object, options?: { abortSignal?: AbortSignal }): Promise<unknown>;
}

/** The command classes the inbox sends. */
export interface SqsCommands {
  SendMessageCommand: CommandClass;
  ReceiveMessageCommand: CommandClass;
  DeleteMessageCommand: CommandClass;
  ChangeMessageVisibilityCommand: CommandClass;
  ChangeMessageVisibilityBatchCommand: CommandClass;
  GetQueueAttributesCommand: CommandClass;
  GetQueueUrlCommand: CommandClass;
}

const loadCommands = commandLoader<SqsCommands>(() => import('@aws-sdk/client-sqs'), 'sqsInbox needs @aws-sdk/client-sqs (v3) installed beside the client it was given');

/** A message as `ReceiveMessage` returns it. */
export interface ReceivedMessage {
  MessageId?: string;
  ReceiptHandle?: string;
  Body?: string;
  Attributes?: Record<string, string | undefined>;
}

/** The error of a request that did not answer within its bound. */
class SqsTimeout extends Error {
  constructor(operation: string, ms: number) {
    super(`SQS did not answer ${operation} within ${ms} ms`);
    this.name = 'SqsTimeout';
  }
}

/**
 * Sends commands through the application's client, each aborted after `ms` (or when `signal`
 * aborts), with the SDK's commands loaded once.
 */
export class SqsRequests {
  readonly #client: SqsClientLike;

  constructor(client: SqsClientLike) {
    this.#client = client;
  }

  /** One request: `make` builds the command from the SDK's classes. */
  async send<T>(operation: string, ms: number, make: (sdk: SqsCommands) => object, signal?: AbortSignal): Promise<T> {
    return (await sendCommand(this.#client, loadCommands, make, ms, () => new SqsTimeout(operation, ms), signal)) as T;
  }
}
