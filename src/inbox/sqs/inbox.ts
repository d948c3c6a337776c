/**
 * The inbox on Amazon SQS: the contract translated into SQS's own features. Accept is one
 * `SendMessage` of the job; a worker, long-running (`work`) or on Lambda (`lambda`), runs each
 * message through the worker's claim protocol and settles it (see `settle.ts`). Dead letters are
 * the messages of the dead-letter queue that the source queue's redrive policy names: the worker
 * sends a job there with its failure at once (a permanent failure or the last attempt), and the
 * redrive policy moves there what no worker ever settled.
 */

import { isObject, isWholeNumber, wholeNumber } from '../../lib/checks.ts';
import { checkLogger, type WebhookLogger } from '../../logger.ts';
import type { IdempotencyStore } from '../../stores/types.ts';
import { DEFAULT_LOCK_SECONDS, DEFAULT_RENEWED_LOCK_SECONDS } from '../../claims.ts';
import { commonSettings, deadLetterLimit, selectedKey, type CommonInboxOptions } from '../job.ts';
import { WorkerStores } from '../lifecycle.ts';
import type { DeadLetter, Inbox, InboxHandler, InboxJob, InboxWorker, JobSelector, WorkOptions } from '../types.ts';
import { JobRunner } from '../worker.ts';
import { SqsRequests, type SqsClientLike } from './client.ts';
import { giveBack, letterOf, remove, scan, type Held } from './dead-letters.ts';
import { runBatch, type SqsLambdaHandler } from './lambda.ts';
import { acceptedBody, fifoFields } from './message.ts';
import { startPolling } from './poller.ts';
import { isQueueUrl, queueUrlOfArn, readQueueSettings, redriveWarning, SQS_MAX_MESSAGE_BYTES, type QueueSettings } from './queue.ts';
import { resend, type SettleContext } from './settle.ts';

/**
 * How long SQS keeps a message at most: 14 days (the largest `MessageRetentionPeriod`). A dead
 * letter is a new message on the dead-letter queue, kept for that queue's retention from the
 * moment it was dead-lettered; a processed job's id is remembered at least this long.
 *
 * @example
 * ```ts
 * import { SQS_RETENTION_SECONDS } from 'webhook-receiver/sqs';
 * console.log(`SQS keeps a message at most ${SQS_RETENTION_SECONDS / 86_400} days`);
 * ```
 */
export const SQS_RETENTION_SECONDS = 14 * 86_400;

/**
 * How long a request of a worker or of the dead-letter commands may take (at least): `timeoutMs`
 * is the accepting side's budget, which a sender waits on; a worker's settlement waits on no one,
 * and giving up on it early only brings the message back.
 */
const WORKER_REQUEST_TIMEOUT_MS = 10_000;

/** How many dead-letter messages `retry` and `purge` look through for one id. */
const SELECT_SCAN_LIMIT = 10_000;

/**
 * Options of {@link sqsInbox}.
 *
 * @example
 * ```ts
 * const options: SqsInboxOptions = { client: new SQSClient({}), queueUrl: process.env.QUEUE_URL!, maxAttempts: 8 };
 * ```
 */
export interface SqsInboxOptions extends CommonInboxOptions {
  /** An `SQSClient` from `@aws-sdk/client-sqs` v3; the app closes it (`client.destroy()`). */
  client: SqsClientLike;
  /** The queue jobs are sent to; the inbox should have it to itself. A name ending in `.fifo` is a FIFO queue. */
  queueUrl: string;
  /**
   * The dead-letter queue. Default: the one the queue's redrive policy names (read once). One of the
   * two is needed to dead-letter; without a redrive policy the inbox warns (it is the backstop for
   * workers that die mid-job).
   */
  deadLetterQueueUrl?: string;
  /**
   * The largest message the queue takes (its `MaximumMessageSize`, 1 024 to 1 048 576 bytes).
   * Default: read from the queue's attributes once, on the first delivery; given, accept makes no
   * such read.
   */
  maxMessageBytes?: number;
  /**
   * Handler attempts before a job goes to the dead-letter queue. Default 12. The queue's redrive
   * policy should have a `maxReceiveCount` above it (the inbox warns otherwise).
   */
  maxAttempts?: number;
  /** The first retry waits `delayMs` (default 2 000), each later one twice the one before, from the upper half (jitter), rounded up to whole seconds (SQS's visibility), at most 12 hours. */
  backoff?: { delayMs?: number };
  /** Messages waiting (visible and delayed, by SQS's approximate counts) past which deliveries are refused with 503. Default 100 000. */
  maxBacklog?: number;
  /** How long the backlog read and the send may take together before the delivery is refused with 503. Default 2 000. */
  timeoutMs?: number;
  /**
   * The visibility a long-running worker's receive sets and its heartbeat renews, in seconds
   * (default 30; never less than the claim's lock). A worker that dies leaves its messages
   * invisible this long.
   */
  visibilityTimeoutSeconds?: number;
  /** Long polling: how long a worker's receive waits for messages, 1 to 20 seconds. Default 20. */
  waitTimeSeconds?: number;
  /** Where the start-up warning about the redrive policy goes. Default: the console. */
  logger?: WebhookLogger;
  /**
   * The workers' store (key class `w`): `work()` and `lambda()` use it unless their own options
   * name one, and `deadLetters()` and `retry()` look there for a job whose handler had in fact
   * succeeded. Default: none. On Lambda, give it: a memory store lives only as long as one instance.
   */
  idempotency?: { store?: IdempotencyStore };
}

/**
 * Options of {@link SqsInbox.lambda}: the worker's, and the time kept back from each invocation.
 *
 * @example
 * ```ts
 * export const handler = inbox.lambda(handle, { idempotency: { store }, concurrency: 10, reserveMs: 3000 });
 * ```
 */
export interface SqsLambdaOptions extends WorkOptions {
  /**
   * Milliseconds kept back from the invocation's remaining time (default 2 000): a record starts
   * only while more is left, and a running handler's `context.signal` aborts when this is left.
   */
  reserveMs?: number;
}

/**
 * An inbox on SQS: the {@link Inbox} contract, plus the Lambda handler.
 *
 * @example
 * ```ts
 * const inbox: SqsInbox = sqsInbox({ client, queueUrl });
 * export const handler = inbox.lambda(async (webhook) => { await events.insert(webhook.json()); }, { idempotency: { store } });
 * ```
 */
export interface SqsInbox extends Inbox {
  /**
   * A Lambda handler for the queue's SQS event source: runs each record through the worker's claim
   * protocol and answers `{ batchItemFailures }` with the records to leave on the queue. The event
   * source mapping must have `ReportBatchItemFailures` on, or Lambda deletes every record of a
   * batch (failed ones too). `concurrency` is how many records run at once (default 1).
   */
  lambda(handler: InboxHandler, options?: SqsLambdaOptions): SqsLambdaHandler;
}

class Sqs implements SqsInbox {
  readonly engine = 'sqs';
  readonly maxAttempts: number;
  readonly maxBacklog: number;
  readonly timeoutMs: number;
  readonly #requests: SqsRequests;
  readonly #queueUrl: string;
  readonly #fifo: boolean;
  readonly #backoffDelayMs: number;
  readonly #maxMessageBytes: number | undefined;
  readonly #deadLetterQueueUrl: string | undefined;
  readonly #visibilitySeconds: number;
  readonly #waitSeconds: number;
  readonly #logger: WebhookLogger | undefined;
  readonly #workers: WorkerStores;
  #settings: Promise<QueueSettings> | undefined;
  #deadLetters: Promise<{ url: string; maxMessageBytes: number }> | undefined;

  constructor(options: SqsInboxOptions) {
    if (!isObject(options)) throw new TypeError('sqsInbox needs an options object: sqsInbox({ client, queueUrl })');
    if (!isObject(options.client) || typeof options.client.send !== 'function') throw new TypeError('sqsInbox client must be an SQSClient from @aws-sdk/client-sqs (v3): it has no send()');
    const checkUrl = (url: unknown, name: string) => {
      if (typeof url !== 'string' || !isQueueUrl(url)) throw new TypeError(`sqsInbox ${name} must be a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)`);
    };
    checkUrl(options.queueUrl, 'queueUrl');
    if (options.deadLetterQueueUrl !== undefined) checkUrl(options.deadLetterQueueUrl, 'deadLetterQueueUrl');
    if (options.deadLetterQueueUrl === options.queueUrl) throw new TypeError('sqsInbox deadLetterQueueUrl must be another queue than queueUrl');
    const settings = commonSettings('sqsInbox', options);
    this.maxAttempts = settings.maxAttempts;
    this.maxBacklog = settings.maxBacklog;
    this.timeoutMs = settings.timeoutMs;
    this.#backoffDelayMs = settings.backoffDelayMs;
    this.#requests = new SqsRequests(options.client);
    this.#queueUrl = options.queueUrl;
    this.#fifo = options.queueUrl.endsWith('.fifo');
    this.#deadLetterQueueUrl = options.deadLetterQueueUrl;
    const maxMessageBytes = options.maxMessageBytes;
    if (maxMessageBytes !== undefined && !isWholeNumber(maxMessageBytes, 1024, SQS_MAX_MESSAGE_BYTES)) {
      throw new RangeError(`sqsInbox maxMessageBytes must be a whole number from 1024 to ${SQS_MAX_MESSAGE_BYTES} (default: the queue's MaximumMessageSize)`);
    }
    this.#maxMessageBytes = maxMessageBytes;
    this.#visibilitySeconds = wholeNumber(options.visibilityTimeoutSeconds, 'sqsInbox visibilityTimeoutSeconds', 1, 43_200, 30);
    this.#waitSeconds = wholeNumber(options.waitTimeSeconds, 'sqsInbox waitTimeSeconds', 1, 20, 20);
    this.#logger = checkLogger(options.logger);
    this.#workers = new WorkerStores('sqsInbox', options.idempotency, SQS_RETENTION_SECONDS * 1000);
  }

  /** The queue's settings, read once (again after a failure); warns once about its redrive policy. */
  #queueSettings(): Promise<QueueSettings> {
    this.#settings ??= readQueueSettings(this.#requests, this.#queueUrl, this.#slowMs).then(
      (settings) => {
        const warning = redriveWarning(settings, this.maxAttempts, this.#queueUrl);
        if (warning !== undefined) {
          if (this.#logger === undefined) console.warn(`[webhook-receiver] ${warning}`);
          else this.#logger.warn({ engine: 'sqs', queueUrl: this.#queueUrl }, warning);
        }
        return settings;
      },
      (error: unknown) => {
        this.#settings = undefined;
        throw error;
      },
    );
    return this.#settings;
  }

  /** The dead-letter queue: the option, or the redrive policy's; with the largest message it takes. */
  #deadLetterQueue(): Promise<{ url: string; maxMessageBytes: number }> {
    this.#deadLetters ??= (async () => {
      let url = this.#deadLetterQueueUrl;
      if (url === undefined) {
        const { deadLetterArn } = await this.#queueSettings();
        if (deadLetterArn === undefined) throw new TypeError(`sqsInbox has no dead-letter queue: the queue ${this.#queueUrl} has no redrive policy and no deadLetterQueueUrl was given`);
        url = await queueUrlOfArn(this.#requests, deadLetterArn, this.#slowMs);
      }
      const { maxMessageBytes } = await readQueueSettings(this.#requests, url, this.#slowMs);
      return { url, maxMessageBytes };
    })().catch((error: unknown) => {
      this.#deadLetters = undefined;
      throw error;
    });
    return this.#deadLetters;
  }

  /** The bound of a worker's (or an operator's) request. */
  get #slowMs(): number {
    return Math.max(this.timeoutMs, WORKER_REQUEST_TIMEOUT_MS);
  }

  #settleContext(): SettleContext {
    return { requests: this.#requests, queueUrl: this.#queueUrl, fifo: this.#fifo, backoffDelayMs: this.#backoffDelayMs, timeoutMs: this.#slowMs, deadLetterQueue: () => this.#deadLetterQueue() };
  }

  async enqueue(job: InboxJob): Promise<'enqueued' | 'duplicate'> {
    const maxMessageBytes = this.#maxMessageBytes ?? (await this.#queueSettings()).maxMessageBytes;
    const body = acceptedBody(job, maxMessageBytes);
    const fifo = await fifoFields(this.#fifo, job, 0);
    // SQS answers only once it stored the message redundantly: from here the job is durable. A
    // FIFO queue drops a second send of one generation silently, which the accepting claim
    // already prevents; it is answered as enqueued either way.
    await this.#requests.send('SendMessage', this.timeoutMs, (sdk) => new sdk.SendMessageCommand({ QueueUrl: this.#queueUrl, MessageBody: body, ...fifo }));
    return 'enqueued';
  }

  async backlog(): Promise<number> {
    const reply = await this.#requests.send<{ Attributes?: Record<string, string | undefined> }>('GetQueueAttributes', this.timeoutMs, (sdk) =>
      new sdk.GetQueueAttributesCommand({ QueueUrl: this.#queueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesDelayed'] }),
    );
    const count = (name: string) => {
      const value = Number(reply?.Attributes?.[name]);
      return Number.isFinite(value) ? value : 0;
    };
    return count('ApproximateNumberOfMessages') + count('ApproximateNumberOfMessagesDelayed');
  }

  async work(handler: InboxHandler, options?: WorkOptions): Promise<InboxWorker> {
    this.#workers.checkOpen();
    const workOptions = this.#workers.optionsOf(options);
    const runner = new JobRunner(handler, workOptions, this.maxAttempts, this.engine, SQS_RETENTION_SECONDS);
    // Before taking jobs: a worker that could not dead-letter would keep failing jobs forever.
    await this.#deadLetterQueue();
    const store = runner.store;
    const lockSeconds = workOptions?.idempotency?.lockSeconds ?? (typeof store.extend === 'function' ? DEFAULT_RENEWED_LOCK_SECONDS : DEFAULT_LOCK_SECONDS);
    // The message stays invisible at least as long as the claim holds, renewed every third of the shorter.
    const visibilitySeconds = Math.max(this.#visibilitySeconds, Math.ceil(lockSeconds));
    const heartbeatMs = Math.max(100, (Math.min(visibilitySeconds, lockSeconds) * 1000) / 3);
    const engine = startPolling(this.#settleContext(), runner, { visibilitySeconds, heartbeatMs, waitSeconds: this.#waitSeconds });
    return this.#workers.add(runner, engine);
  }

  lambda(handler: InboxHandler, options?: SqsLambdaOptions): SqsLambdaHandler {
    const reserveMs = options?.reserveMs ?? 2000;
    if (typeof reserveMs !== 'number' || !Number.isFinite(reserveMs) || reserveMs < 0) throw new RangeError('sqsInbox lambda reserveMs must be a non-negative number of milliseconds (default 2 000)');
    const runner = new JobRunner(handler, this.#workers.optionsOf(options), this.maxAttempts, this.engine, SQS_RETENTION_SECONDS);
    this.#workers.watch(runner);
    const context = this.#settleContext();
    return function sqsLambdaHandler(event, lambdaContext) {
      return runBatch(context, runner, event, lambdaContext, { reserveMs });
    };
  }

  /** Scans the dead-letter queue, runs `use` on what it holds, then gives back what `use` left. */
  async #withDeadLetters<T>(limit: number, use: (held: Held[], queueUrl: string) => Promise<{ value: T; taken: Set<Held> }>): Promise<T> {
    const { url } = await this.#deadLetterQueue();
    const held = await scan(this.#requests, url, limit, this.#slowMs);
    let taken = new Set<Held>();
    try {
      const result = await use(held, url);
      taken = result.taken;
      return result.value;
    } finally {
      await giveBack(this.#requests, url, held.filter((message) => !taken.has(message)), this.#slowMs);
    }
  }

  async deadLetters(options?: { limit?: number }): Promise<DeadLetter[]> {
    const limit = deadLetterLimit(options);
    // How many receives a message the redrive policy moved had: the policy's, whichever way the dead-letter queue was named.
    const { maxReceiveCount } = await this.#queueSettings();
    const letters = await this.#withDeadLetters(limit, async (held) => ({
      value: [...held].sort((a, b) => a.sentAt - b.sentAt).flatMap((message) => letterOf(message, maxReceiveCount) ?? []),
      taken: new Set<Held>(),
    }));
    return this.#workers.unprocessed(letters);
  }

  async retry(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const key = selectedKey(webhookId, selector, 'retry');
    return this.#withDeadLetters(SELECT_SCAN_LIMIT, async (held, url) => {
      const matches = held.filter((message) => message.key === key);
      const none = { value: false, taken: new Set<Held>() };
      if (matches.length === 0 || (await this.#workers.processed(matches[0]!.envelope.job))) return none;
      // Sent before the dead letter goes: a retry that fails half-way leaves the dead letter, and
      // a job sent twice runs once (the worker's claim). Attempts count anew; a new generation.
      const { envelope } = matches[0]!;
      await resend(this.#settleContext(), { job: envelope.job, attemptsBefore: 0, generation: envelope.generation }, 0);
      for (const message of matches) await remove(this.#requests, url, message, this.#slowMs);
      return { value: true, taken: new Set(matches) };
    });
  }

  async purge(webhookId: string, selector?: JobSelector): Promise<boolean> {
    const key = selectedKey(webhookId, selector, 'purge');
    return this.#withDeadLetters(SELECT_SCAN_LIMIT, async (held, url) => {
      const matches = held.filter((message) => message.key === key);
      for (const message of matches) await remove(this.#requests, url, message, this.#slowMs);
      return { value: matches.length > 0, taken: new Set(matches) };
    });
  }

  close(): Promise<void> {
    // The client is the app's: only the workers this inbox started are its own.
    return this.#workers.close();
  }
}

/**
 * An inbox on an Amazon SQS queue. Pass it to `createReceiver({ inbox })` or an adapter (the
 * Lambda adapter too) on the accepting side; process with `inbox.lambda(handler)` as the handler
 * of a Lambda SQS trigger (with `ReportBatchItemFailures` on), or `inbox.work(handler)` in a
 * long-running process. The queue's redrive policy names the dead-letter queue.
 *
 * @example
 * ```ts
 * import { SQSClient } from '@aws-sdk/client-sqs';
 * import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
 * import { createReceiver } from 'webhook-receiver';
 * import { dynamoStore } from 'webhook-receiver/dynamodb';
 * import { sqsInbox } from 'webhook-receiver/sqs';
 *
 * const store = dynamoStore({ client: new DynamoDBClient({}), table: 'webhook-claims' });
 * const inbox = sqsInbox({ client: new SQSClient({}), queueUrl: process.env.QUEUE_URL!, idempotency: { store } });
 * const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET!, inbox, idempotency: { store } });
 *
 * // The worker Lambda, triggered by the queue:
 * export const handler = inbox.lambda(async (webhook) => { await events.insert(webhook.json()); }, { concurrency: 10 });
 * ```
 */
export function sqsInbox(options: SqsInboxOptions): SqsInbox {
  return new Sqs(options);
}
