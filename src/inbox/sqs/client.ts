/**
 * The SQS client as the inbox sees it: the application's `SQSClient` (typed by the one method the
 * inbox calls, so neither the package nor its types need the SDK), the command classes loaded
 * from the application's own `@aws-sdk/client-sqs` on first use (an SDK client only sends its own
 * command objects), and one request bounded by a timeout that aborts it.
 */

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

type CommandClass = new (input: object) => object;

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

// A string literal, so an application's bundler sees it; never bundled into this package.
let commands: Promise<SqsCommands> | undefined;
function loadCommands(): Promise<SqsCommands> {
  commands ??= import('@aws-sdk/client-sqs').then(
    (sdk) => sdk as unknown as SqsCommands,
    (error: unknown) => {
      commands = undefined;
      throw new Error('sqsInbox needs @aws-sdk/client-sqs (v3) installed beside the client it was given', { cause: error });
    },
  );
  return commands;
}

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
    const sdk = await loadCommands();
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new SqsTimeout(operation, ms)), ms);
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return (await this.#client.send(make(sdk), { abortSignal: controller.signal })) as T;
    } catch (error) {
      // The SDK rejects an aborted request with its own AbortError: say which bound it was.
      if (controller.signal.aborted && controller.signal.reason instanceof SqsTimeout) throw controller.signal.reason;
      throw error;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }
}
