/**
 * The receiver's public shapes: its options, what a claim and a handler's context are, what
 * `handle` resolves with, and the defaults. Below the receiver's parts (the claim protocol, the
 * handler context, the receiver itself), so each of them imports its types from here.
 */

import type { InboxJob } from '../job-format.ts';
import type { WebhookLogger } from '../logger.ts';
import type { OrderingOptions } from '../ordering.ts';
import type { OutcomeEvent, TelemetryOptions } from '../telemetry.ts';
import type { ClaimHandle, IdempotencyStore } from '../stores/types.ts';
import type { TenantKeys } from '../keys.ts';
import type { SecretInput } from '../secrets.ts';
import type { VerifiedWebhook, Verifier, VerifierOptions, WebhookInput } from '../verify.ts';
import type { WebhookContext } from '../context.ts';

export type { WebhookContext } from '../context.ts';
// The claim protocol's defaults, shared with an inbox's workers: public through the receiver.
export { DEFAULT_LOCK_SECONDS, DEFAULT_RENEWED_LOCK_SECONDS, DEFAULT_TTL_SECONDS } from '../claims.ts';

/**
 * Options of {@link InboxIntake.enqueue}.
 *
 * @example
 * ```ts
 * await inbox.enqueue(job, { claim: context.claim });
 * ```
 */
export interface EnqueueOptions {
  /**
   * The accepting claim. An engine that can insert its job in the store's transaction (pg-boss with
   * `transactional: true` and the Postgres store) completes it there, with the job.
   */
  claim?: ClaimHandle | undefined;
}

/**
 * What the receiver needs of an inbox to accept deliveries into it: the engine's name, its bounds,
 * and a way to add a job and count the waiting ones. Every `Inbox` (`bullmqInbox`, `pgBossInbox`,
 * `cloudflareQueueInbox`) is one: the inbox builds on the receiver and hands itself in through
 * this, so the receiver knows nothing of queues, workers or dead letters.
 *
 * @example
 * ```ts
 * import { createReceiver, type InboxIntake } from 'webhook-receiver';
 * import { bullmqInbox } from 'webhook-receiver/bullmq';
 *
 * const inbox: InboxIntake = bullmqInbox({ queue });
 * const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET!, inbox });
 * ```
 */
export interface InboxIntake {
  /** The engine's name: `bullmq`, `pg-boss`, `cloudflare-queues`. */
  readonly engine: string;
  /** Jobs waiting (or delayed) past which the receiver refuses new deliveries with 503 `INBOX_UNAVAILABLE`. */
  readonly maxBacklog: number;
  /** How long the receiver waits for the engine, its backlog read and the job's acknowledgement together, before answering 503 `INBOX_UNAVAILABLE`. */
  readonly timeoutMs: number;
  /**
   * Adds the job: `enqueued`, or `duplicate` when the engine already holds a job of this id. Rejects
   * when the engine refuses (a 503 `INBOX_UNAVAILABLE`), or with a `WebhookError` below 500 for a
   * job it can never take (`PAYLOAD_TOO_LARGE` past a message limit), which the receiver answers
   * as it is. The receiver bounds it by what is left of `timeoutMs` after the backlog read.
   */
  enqueue(job: InboxJob, options?: EnqueueOptions): Promise<'enqueued' | 'duplicate'>;
  /** How many jobs wait to run (waiting and delayed, not running). */
  backlog(): Promise<number>;
}

/**
 * How deliveries of the same `webhook-id` are deduplicated.
 *
 * @example
 * ```ts
 * import type { IdempotencyOptions } from 'webhook-receiver';
 * const idempotency: IdempotencyOptions = { ttlSeconds: 7 * 86_400, lockSeconds: 30, namespace: 'billing' };
 * ```
 */
export interface IdempotencyOptions {
  /** Where claims live. Default: a `memoryStore()` of this receiver's own (one process only). */
  store?: IdempotencyStore;
  /**
   * How long a completed id is remembered; make it longer than the sender's retry schedule.
   * Default 86 400. At least twice `toleranceSeconds` (600 with the default 300), or
   * `createReceiver` throws a `RangeError`: a timestamp is accepted on either side of now, so a
   * captured request stays replayable for twice the tolerance, and its id must be remembered as
   * long. (A memory store at its `max` forgets its oldest completed ids sooner: size it for the
   * ids of that window.)
   */
  ttlSeconds?: number;
  /**
   * How long a claim holds without renewal. While a handler runs, the receiver renews it every
   * third of this (with a store that has `extend`), so it bounds how long a crashed instance's
   * claim blocks the retries, not how long a handler may run. Default 30 with a store that
   * renews, 60 with one that cannot (then make it longer than the slowest handler).
   */
  lockSeconds?: number;
  /**
   * How long a completed *unsigned* id is remembered (with `unsigned: 'accept'`), in a key space of
   * its own. Default: the smaller of `ttlSeconds` and 3 600.
   */
  unsignedTtlSeconds?: number;
  /**
   * Keeps several endpoints' or senders' ids apart in one store; no `:` in it. A function of the
   * verified webhook serves several senders from one receiver: make it depend on the sender, and
   * stable across a key rotation (map each `keyId` to its tenant). Default `'default'`.
   *
   * With tenant `keys`, each tenant's ids are kept apart: the default is `t.` followed by the
   * tenant with `%` and `:` percent-encoded (`t.acme`), a string is followed by `.t.` and the
   * tenant (`billing.t.acme`), and a function receives the webhook, `webhook.tenant` included.
   */
  namespace?: string | ((webhook: VerifiedWebhook) => string);
  /** Store unreachable when claiming: refuse with 503 `STORE_UNAVAILABLE` (default) or run without dedup. */
  onStoreError?: 'reject' | 'process';
}

/**
 * What went wrong outside the request's own outcome, reported to `onError`.
 *
 * @example
 * ```ts
 * const onError = (error: unknown, context: ReceiverErrorContext) =>
 *   logger.error({ stage: context.stage, webhookId: context.webhookId }, String(error));
 * ```
 */
export interface ReceiverErrorContext {
  /**
   * - `claim`: the store failed, or answered outside its contract (the delivery was refused), or
   *   `onStoreError: 'process'` ran the handler without deduplication;
   * - `complete` / `release`: settling the claim failed, or the claim had been lost;
   * - `renew`: renewing a running handler's claim failed or found it lost (`context.signal` is
   *   aborted when it is lost);
   * - `namespace`: the `namespace` function threw or returned an invalid namespace.
   */
  stage: 'claim' | 'complete' | 'release' | 'renew' | 'namespace';
  webhookId: string;
  /**
   * With tenant keys, the tenant whose keys verified the delivery; absent otherwise. Named by the
   * request's route, host or header: escape it before writing it into a text log (the default
   * log does).
   */
  tenant?: string;
  /**
   * `true` when the receiver keeps trying: a failed `complete` is retried in the background (with
   * backoff) while the claim's lock lasts, so a short store outage does not let a later duplicate
   * run the handler again; a failed renewal is tried again at the next beat. A last report with
   * `false` follows if it never succeeds.
   */
  willRetry: boolean;
}

/**
 * Options of {@link createReceiver}: the verifier's, plus idempotency.
 *
 * @example
 * ```ts
 * const options: ReceiverOptions = { secrets: process.env.WEBHOOK_SECRET!, idempotency: { ttlSeconds: 3600 } };
 * ```
 */
export interface ReceiverOptions extends Omit<VerifierOptions, 'secrets'> {
  /** Every trusted key, for one sender (or several sharing them). Give either `secrets` or `keys`. */
  secrets?: SecretInput | readonly SecretInput[];
  /**
   * Keys per tenant, looked up per request (see `tenantKeys`), instead of `secrets` (giving both is
   * a `TypeError`). Verified webhooks carry `tenant`, and each tenant's ids are deduplicated in a
   * namespace of its own.
   */
  keys?: TenantKeys;
  /**
   * `true` for a receiver that takes only events pulled from the relay (`triggerSource` in
   * `webhook-receiver/relay`): it needs neither `secrets` nor `keys` (giving either is a
   * `TypeError`), since a pulled event is authenticated by the relay's API key, not by a signature.
   * A pushed request handed to it (`handle`, `accept`, `verifier`) is refused with a `TypeError`
   * that names this option. Default `false`.
   */
  pullOnly?: boolean;
  /** On by default, with an in-memory store. `false` turns deduplication off. */
  idempotency?: IdempotencyOptions | false;
  /**
   * Called when the store fails outside the request's own outcome (see
   * {@link ReceiverErrorContext}). Default: one `console.error` line with the stage, the id and
   * the error's message.
   */
  onError?: (error: unknown, context: ReceiverErrorContext) => void;
  /**
   * Where the default logging goes: a pino-style logger (`warn(fields, message)`,
   * `error(fields, message)`, Fastify's `request.log` too) gets structured fields, the console
   * (default) one line. `onError` and an adapter's `onRejected`, when given, replace that logging.
   */
  logger?: WebhookLogger;
  /**
   * OpenTelemetry metrics and spans through the app's own `@opentelemetry/api` (see the guide
   * docs/operating.md): `telemetry: { api }` with `import * as api from '@opentelemetry/api'`.
   */
  telemetry?: TelemetryOptions;
  /** Called once per delivery with its outcome, for apps that count things their own way. */
  onOutcome?: (event: OutcomeEvent) => void;
  /**
   * Acknowledge fast, process later: with an inbox (`bullmqInbox`, `pgBossInbox`), the receiver
   * accepts deliveries into it (`receiver.accept`, and every adapter built without a handler) and
   * workers run the handler (`inbox.work`). A receiver with an inbox has no `handle`.
   */
  inbox?: InboxIntake;
  /**
   * Out-of-order events (docs/ordering.md): `key(event)` names the entity of a signed delivery's
   * parsed payload, `version(event)` its version; a delivery older than the entity's highest
   * processed version is `stale` (its handler does not run; 200 `{"stale":true}`), and by default
   * one delivery of an entity runs at a time (another answers 409 `ENTITY_BUSY`). Needs a store
   * with the ordering operations (memory, Redis, Postgres, Durable Object). With an `inbox`, the
   * entity and version are read at accept and the job carries them; the workers judge staleness
   * and hold the entity when they process it (a stale job is acknowledged with the worker outcome
   * `stale`, a busy entity's job is deferred without spending an attempt).
   */
  ordering?: OrderingOptions;
}

/**
 * The outcome of {@link Receiver.handle} (`processed`, `duplicate`, `in_progress`) and of
 * {@link Receiver.accept} (`enqueued`, `duplicate`, `in_progress`).
 *
 * @example
 * ```ts
 * const result = await receiver.handle(request, (webhook) => save(webhook.json()));
 * if (result.outcome === 'in_progress') console.log('retry in', result.retryAfterSeconds, 's');
 * ```
 */
export type ReceiveResult<T> =
  | { outcome: 'processed'; webhook: VerifiedWebhook; value: T }
  /** Accepted into an inbox by {@link Receiver.accept}: a worker runs the handler. */
  | { outcome: 'enqueued'; webhook: VerifiedWebhook }
  | { outcome: 'duplicate'; webhook: VerifiedWebhook }
  /** Ordering: an older version than one already processed for its entity; the handler did not run. */
  | { outcome: 'stale'; webhook: VerifiedWebhook }
  | { outcome: 'in_progress'; webhook: VerifiedWebhook; retryAfterSeconds: number };

/**
 * The outcome of {@link Receiver.accept}: `enqueued` once the engine acknowledged the job,
 * `duplicate` for an id accepted before (waiting, running, processed or dead-lettered: not enqueued
 * again), `in_progress` while another delivery of the id is being accepted.
 *
 * @example
 * ```ts
 * const result: AcceptResult = await receiver.accept(request);
 * if (result.outcome === 'in_progress') console.log('retry in', result.retryAfterSeconds, 's');
 * ```
 */
export type AcceptResult = Exclude<ReceiveResult<never>, { outcome: 'processed' }>;

/**
 * A claim on a verified webhook's id, for frameworks whose handler runs after the middleware.
 * Call `complete()` when the handler succeeded and `release()` when it failed; both are
 * idempotent, the first one called wins, and neither throws (store failures go to `onError`).
 * While neither has been called, the receiver renews the claim.
 *
 * @example
 * ```ts
 * const claim = await receiver.claim(request);
 * if (claim.outcome === 'acquired') {
 *   try { await handle(claim.webhook, claim.context); await claim.complete(); }
 *   catch (error) { await claim.release(); throw error; }
 * }
 * ```
 */
export interface Claim {
  /** `stale` (ordering): an older version than one already processed; the id is recorded as done. */
  outcome: 'acquired' | 'duplicate' | 'in_progress' | 'stale';
  webhook: VerifiedWebhook;
  /** With `in_progress`: when the current holder's claim runs out, in whole seconds. */
  retryAfterSeconds?: number;
  /** The handler's context (its `signal` and `claim`). */
  context: WebhookContext;
  /** Marks the id done: later deliveries of it are duplicates. Call it once the work succeeded. */
  complete(): Promise<void>;
  /** Gives the id back, so the sender's retry runs the work. Call it when the work failed. */
  release(): Promise<void>;
  /**
   * Work that goes on after `complete()` resolved (a failed completion retried in the background),
   * or `undefined` when there is none: hand it to the platform's `waitUntil` where the runtime
   * stops a request's work once it answered (Workers, Lambda), or await it.
   */
  pending(): Promise<void> | undefined;
}

/**
 * Options of {@link Receiver.handle}.
 *
 * @example
 * ```ts
 * export default {
 *   async fetch(request: Request, env: unknown, ctx: { waitUntil(promise: Promise<unknown>): void }) {
 *     await receiver.handle(request, onEvent, { waitUntil: (promise) => ctx.waitUntil(promise) });
 *     return new Response(null, { status: 204 });
 *   },
 * };
 * ```
 */
export interface HandleOptions {
  /** Takes work left after the answer (a completion retried during a store outage). */
  waitUntil?: (promise: Promise<unknown>) => void;
}

/**
 * Options of {@link Receiver.claim}.
 *
 * @example
 * ```ts
 * // AWS Lambda: no lock outlives the invocation that holds it.
 * const claim = await receiver.claim(input, { deadline: Date.now() + context.getRemainingTimeInMillis() });
 * ```
 */
export interface ClaimOptions {
  /**
   * Epoch milliseconds past which this claim's holder cannot run (a platform's time limit): the
   * lock is taken, and renewed, for no longer than the time left until then, so a retry after a
   * frozen or killed invocation is not blocked for the whole `lockSeconds`.
   */
  deadline?: number;
}

/**
 * Options of {@link Receiver.close}.
 *
 * @example
 * ```ts
 * process.on('SIGTERM', () => void receiver.close({ timeoutMs: 10_000 }));
 * ```
 */
export interface CloseOptions {
  /** How long to wait for completions still in flight. Default 5 000. */
  timeoutMs?: number;
}

/**
 * A verifier plus idempotency.
 *
 * @example
 * ```ts
 * const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET! });
 * const result = await receiver.handle(request, async (webhook) => {
 *   await db.events.insert(webhook.json());
 * });
 * ```
 */
export interface Receiver {
  /**
   * The receiver's verifier. With `keys`, it verifies each input with the keys of the tenant that
   * input names (as `keys.verifier()` does), and its webhooks carry `tenant`.
   */
  readonly verifier: Verifier;
  /** The inbox the receiver accepts into (the side of it the receiver uses), when it was built with one. */
  readonly inbox: InboxIntake | undefined;
  /**
   * Verify, claim, run the handler, then complete (it returned) or release (it threw; the error
   * propagates). A `TypeError` on a receiver built with an inbox (use `accept`). Resolves after the first completion attempt; a failed one is retried in the
   * background while the lock lasts, and that work goes to `options.waitUntil` when given (pass
   * the platform's on Workers or Lambda, or use `claim()` and await `pending()`).
   */
  handle<T>(
    input: WebhookInput | Request,
    handler: (webhook: VerifiedWebhook, context: WebhookContext) => T | Promise<T>,
    options?: HandleOptions,
  ): Promise<ReceiveResult<T>>;
  /**
   * With an inbox: verify, deduplicate on the id (signed and unsigned apart), enqueue, and resolve
   * once the engine acknowledged the job. The engine refusing, not answering within its
   * `timeoutMs`, or holding more than `maxBacklog` jobs rejects with 503 `INBOX_UNAVAILABLE`, the
   * claim released so the sender's retry enqueues it. A `TypeError` without an inbox (use `handle`).
   */
  accept(input: WebhookInput | Request): Promise<AcceptResult>;
  /** Verify and claim, for adapters whose handler runs later. */
  claim(input: WebhookInput | Request, options?: ClaimOptions): Promise<Claim>;
  /**
   * Ordering: forgets the recorded version of `entity` (what `ordering.key` returned, as text), so
   * older events of it apply again (after restoring it from a backup, say). In the receiver's
   * namespace, or `options.namespace` (needed when the namespace is a function). Rejects with
   * `STORE_UNAVAILABLE` when the store fails; a `TypeError` without `ordering`.
   */
  forgetVersion(entity: string | number | bigint, options?: { namespace?: string }): Promise<void>;
  /**
   * Resolves when the store answers (a readiness check); rejects with `STORE_UNAVAILABLE`
   * otherwise. Resolves at once without deduplication or with a store that has no `ping`.
   */
  ping(): Promise<void>;
  /**
   * For a graceful shutdown (SIGTERM): refuses new deliveries (503 `STORE_UNAVAILABLE`, so the
   * sender retries elsewhere), stops renewing claims, aborts `context.signal` of handlers still
   * running, and waits up to `timeoutMs` for completions in flight.
   */
  close(options?: CloseOptions): Promise<void>;
}

/**
 * One hour: the longest an unsigned id is remembered by default.
 *
 * @example
 * ```ts
 * import { createReceiver, DEFAULT_UNSIGNED_TTL_SECONDS } from 'webhook-receiver';
 * const receiver = createReceiver({ secrets, unsigned: 'accept', idempotency: { unsignedTtlSeconds: DEFAULT_UNSIGNED_TTL_SECONDS / 4 } });
 * ```
 */
export const DEFAULT_UNSIGNED_TTL_SECONDS = 3_600;
