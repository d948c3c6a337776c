/**
 * verify -> claim -> run the handler (renewing the claim while it runs) -> complete (success) or
 * release (failure).
 *
 * Delivery is at-least-once and `webhook-id` is the idempotency key, so a handler runs to success
 * at most once per id, and a handler that fails releases its claim so the sender's retry runs it.
 * What counts is the handler's result, never the connection: a sender that timed out and left
 * still gets a successful run completed, so its retry is answered as a duplicate (issue 11).
 */

import { errorText, rejection, unsignedLimit, WebhookError } from './errors.ts';
import { checkLogger, logFailure, type WebhookLogger } from './logger.ts';
import { checkOrderingOptions, entityKey, orderingOf, type Ordering, type OrderingOptions } from './ordering.ts';
import { attachTrace, noteAnswer, Observer, traceOf, type OutcomeEvent, type TelemetryOptions, type Trace } from './telemetry.ts';
import { memoryStore } from './stores/memory.ts';
import { checkEntity, completingInStore, isCompletedByStore, ORDERING_OPERATIONS, storeCompletionOf, syncOperations, type SyncOperations } from './stores/internal.ts';
import { StoreError, type ClaimHandle, type ClaimResult, type EntityOrder, type IdempotencyStore, type OrderedClaimResult } from './stores/types.ts';
import { createVerifier, DEFAULT_TOLERANCE_SECONDS, type VerifiedWebhook, type Verifier, type VerifierOptions, type WebhookInput } from './verify.ts';

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
export interface ReceiverOptions extends VerifierOptions {
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
   * Out-of-order events (docs/ordering.md): `key(event)` names the entity of a signed delivery's
   * parsed payload, `version(event)` its version; a delivery older than the entity's highest
   * processed version is `stale` (its handler does not run; 200 `{"stale":true}`), and by default
   * one delivery of an entity runs at a time (another answers 409 `ENTITY_BUSY`). Needs a store
   * with the ordering operations (memory, Redis, Postgres, Durable Object).
   */
  ordering?: OrderingOptions;
}

/**
 * What a handler gets besides the webhook, the same object in every adapter.
 *
 * - `signal` aborts when the handler should stop: its claim was lost (renewal failed past the
 *   lock, or another delivery took the id over) or the receiver was closed. A client that leaves
 *   does not abort it: a handler that still succeeds completes its claim.
 * - `claim` identifies the claim for stores that settle it inside the handler's own transaction
 *   (`store.transaction(context, fn)` of the Postgres store); `undefined` without deduplication.
 *
 * @example
 * ```ts
 * await receiver.handle(request, async (webhook, context) => {
 *   const response = await fetch(apiUrl, { method: 'POST', body: webhook.body, signal: context.signal });
 *   if (!response.ok) throw new Error(`upstream answered ${response.status}`);
 * });
 * ```
 */
export interface WebhookContext {
  readonly signal: AbortSignal;
  readonly claim: ClaimHandle | undefined;
}

/**
 * The outcome of {@link Receiver.handle}.
 *
 * @example
 * ```ts
 * const result = await receiver.handle(request, (webhook) => save(webhook.json()));
 * if (result.outcome === 'in_progress') console.log('retry in', result.retryAfterSeconds, 's');
 * ```
 */
export type ReceiveResult<T> =
  | { outcome: 'processed'; webhook: VerifiedWebhook; value: T }
  | { outcome: 'duplicate'; webhook: VerifiedWebhook }
  /** Ordering: an older version than one already processed for its entity; the handler did not run. */
  | { outcome: 'stale'; webhook: VerifiedWebhook }
  | { outcome: 'in_progress'; webhook: VerifiedWebhook; retryAfterSeconds: number };

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
  readonly verifier: Verifier;
  /**
   * Verify, claim, run the handler, then complete (it returned) or release (it threw; the error
   * propagates). Resolves after the first completion attempt; a failed one is retried in the
   * background while the lock lasts, and that work goes to `options.waitUntil` when given (pass
   * the platform's on Workers or Lambda, or use `claim()` and await `pending()`).
   */
  handle<T>(
    input: WebhookInput | Request,
    handler: (webhook: VerifiedWebhook, context: WebhookContext) => T | Promise<T>,
    options?: HandleOptions,
  ): Promise<ReceiveResult<T>>;
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
 * 24 hours: how long a completed id is remembered by default.
 *
 * @example
 * ```ts
 * import { createReceiver, DEFAULT_TTL_SECONDS } from 'webhook-receiver';
 * const receiver = createReceiver({ secrets, idempotency: { ttlSeconds: 3 * DEFAULT_TTL_SECONDS } });
 * ```
 */
export const DEFAULT_TTL_SECONDS = 86_400;
/**
 * One minute: how long a claim holds by default with a store that cannot renew it (no `extend`),
 * so it must outlast the slowest handler.
 *
 * @example
 * ```ts
 * import { createReceiver, DEFAULT_LOCK_SECONDS } from 'webhook-receiver';
 * const receiver = createReceiver({ secrets, idempotency: { store: myStore, lockSeconds: 5 * DEFAULT_LOCK_SECONDS } });
 * ```
 */
export const DEFAULT_LOCK_SECONDS = 60;
/**
 * 30 seconds: the default lock with a store that renews claims (`extend`). Renewed every 10 s
 * while the handler runs, it survives two missed renewals, and a crashed instance's claims free
 * up for the sender's retries within 30 s.
 *
 * @example
 * ```ts
 * import { DEFAULT_RENEWED_LOCK_SECONDS } from 'webhook-receiver';
 * console.log(`a crashed instance blocks retries for at most ${DEFAULT_RENEWED_LOCK_SECONDS} s`);
 * ```
 */
export const DEFAULT_RENEWED_LOCK_SECONDS = 30;
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

/** A failed completion is retried after 100 ms, then with the delay doubling up to 2 s. */
const COMPLETE_RETRY_FIRST_MS = 100;
const COMPLETE_RETRY_MAX_MS = 2000;
/** How many receivers with a default memory store one process builds before it is told. */
const MANY_RECEIVERS = 100;
const DEFAULT_CLOSE_TIMEOUT_MS = 5000;

/** What `complete` and `release` return when there is nothing to wait for. */
const DONE: Promise<void> = Promise.resolve();
const noop = (): Promise<void> => DONE;
const nothingPending = (): undefined => undefined;

/** Each receiver's observer, for the adapters' shared flow (`observerOf`). */
const observers = new WeakMap<Receiver, Observer>();

/**
 * The observer of a receiver built by {@link createReceiver}: the adapters' shared flow reports
 * the rejections it makes itself through it. Internal.
 */
export function observerOf(receiver: Receiver): Observer | undefined {
  return observers.get(receiver);
}

let receiversWithOwnMemoryStore = 0;
let warnedAboutManyReceivers = false;

function isRequest(input: WebhookInput | Request): input is Request {
  return typeof (input as Request).arrayBuffer === 'function' && typeof (input as Request).method === 'string';
}

function positiveSeconds(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  // Stores take milliseconds, which must stay exact integers (2^53 ms is some 285 000 years).
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value * 1000 > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`idempotency.${name} must be a positive, finite number of seconds (default ${fallback})`);
  }
  return value;
}

/**
 * A signed id must be remembered for as long as a request carrying it can still be accepted. The
 * timestamp window is two-sided (a timestamp T passes from T - tolerance until T + tolerance), so
 * a captured request stays replayable for twice the tolerance: a shorter `ttlSeconds` forgets the
 * id while the replay would still verify, and the handler runs again.
 */
function checkReplayWindow(ttlSeconds: number, isDefault: boolean, toleranceSeconds: number): void {
  if (ttlSeconds >= 2 * toleranceSeconds) return;
  throw new RangeError(
    `idempotency.ttlSeconds (${ttlSeconds}${isDefault ? ', the default' : ''}) must be at least twice toleranceSeconds (${toleranceSeconds}), ` +
      `${2 * toleranceSeconds} s: a timestamp is accepted from ${toleranceSeconds} s before until ${toleranceSeconds} s after it, and an id ` +
      'forgotten sooner lets a captured request be replayed and run again',
  );
}

/** Why a namespace cannot be used, or `undefined` when it can. */
function namespaceProblem(namespace: unknown): string | undefined {
  if (typeof namespace !== 'string' || namespace.length === 0) return 'must be a non-empty string';
  // Keys are `${namespace}:${class}:${webhook-id}`. Ids may contain ':', so a namespace must
  // not, or namespace 'a:s' with id 'x' and namespace 'a' with id 's:x' would share one key.
  if (namespace.includes(':')) return `must not contain ':' (use '-' or '.' to separate words)`;
  return undefined;
}

function defaultOnError(logger: WebhookLogger | undefined, error: unknown, context: ReceiverErrorContext): void {
  const what =
    context.stage === 'claim'
      ? 'idempotency store failed while claiming'
      : context.stage === 'namespace'
        ? 'the idempotency namespace function failed'
        : context.stage === 'renew'
          ? `could not renew the claim of a running handler${context.willRetry ? ' (retrying)' : ''}`
          : `could not ${context.stage} the idempotency claim${context.willRetry ? ' (retrying)' : ''}`;
  logFailure(logger, { stage: context.stage, webhookId: context.webhookId, willRetry: context.willRetry }, what, error);
}

/** A store answer outside the contract: fail closed. */
function badReply(operation: string, reply: unknown): StoreError {
  const shown = reply === null ? 'null' : typeof reply === 'object' ? JSON.stringify(Object.keys(reply as object)) : typeof reply;
  return new StoreError('custom', 'bad_reply', `the idempotency store answered ${operation} outside its contract (${shown}); the delivery was refused rather than run unprotected`);
}

/** The claim result, checked against the contract (a custom store may answer anything); `stale` and `busy` only from `claimOrdered`. */
function checkedClaim(result: unknown, ordered: boolean): OrderedClaimResult {
  if (typeof result === 'object' && result !== null) {
    const { status, token, retryAfterMs } = result as { status?: unknown; token?: unknown; retryAfterMs?: unknown };
    if (status === 'acquired' && typeof token === 'string' && token.length > 0) return result as ClaimResult;
    if (status === 'completed' || (ordered && status === 'stale')) return result as OrderedClaimResult;
    if (
      (status === 'processing' || (ordered && status === 'busy')) &&
      (retryAfterMs === undefined || (typeof retryAfterMs === 'number' && retryAfterMs >= 0 && Number.isFinite(retryAfterMs)))
    ) {
      return result as OrderedClaimResult;
    }
  }
  throw badReply('claim', result);
}

/** A context for deliveries without a claim (no deduplication): a signal only the receiver's close aborts. */
class Context implements WebhookContext {
  #controller: AbortController | undefined;
  #reason: unknown;
  #aborted = false;
  constructor(readonly claim: ClaimHandle | undefined) {}
  /** Made on first use: most handlers never look at it. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}

/** An acquired claim while its handler runs: what the heartbeat renews and `close` aborts. */
class Held implements ClaimHandle {
  readonly context: Context;
  /** Epoch ms: when the lock runs out unless renewed. */
  lockEnds: number;
  /** Epoch ms: when it is next due for renewal. */
  renewAt: number;
  /** A renewal is on its way to the store. */
  renewing = false;
  /** Settled (completed or released) or lost: no more renewals. */
  over = false;
  /** Background work after the first settlement attempt (completion retries). */
  pending: Promise<void> | undefined;
  /** The delivery's record, when it is observed. */
  trace: Trace | undefined;

  constructor(
    readonly store: IdempotencyStore,
    readonly key: string,
    readonly token: string,
    readonly ttlMs: number,
    readonly lockMs: number,
    readonly webhookId: string,
    time: number,
    /** {@link ClaimOptions.deadline}: renewals never reach past it. */
    readonly deadline: number | undefined,
    /** Ordering: the delivery's entity and version, settled with the id. */
    readonly order: EntityOrder | undefined,
  ) {
    this.context = new Context(this);
    this.lockEnds = time + lockMs;
    this.renewAt = time + lockMs / 3;
  }
}

class ReceiverImpl implements Receiver {
  readonly verifier: Verifier;
  readonly #store: IdempotencyStore | undefined;
  /** The store's operations without their promises, when it has them (the memory store). */
  readonly #sync: SyncOperations | undefined;
  readonly #ttlMs: number;
  readonly #unsignedTtlMs: number;
  readonly #lockMs: number;
  /** The namespace function, or undefined with a fixed namespace. */
  readonly #namespace: ((webhook: VerifiedWebhook) => string) | undefined;
  /** With a fixed namespace: `${namespace}:s:` and `${namespace}:u:`. */
  readonly #signedPrefix: string;
  readonly #unsignedPrefix: string;
  readonly #processOnStoreError: boolean;
  /** Ordering, checked; `undefined` without it. */
  readonly #ordering: Ordering | undefined;
  /** The fixed namespace, or undefined with a namespace function. */
  readonly #fixedNamespace: string | undefined;
  readonly #onError: (error: unknown, context: ReceiverErrorContext) => void;
  readonly #observer: Observer;
  readonly #now: () => number;
  /** Claims whose handler runs, for renewal (only with a store that has `extend`) and `close`. */
  readonly #held = new Set<Held>();
  readonly #renews: boolean;
  /** Contexts of handlers running without a claim, for `close`. */
  readonly #unclaimed = new Set<Context>();
  /** Completions still being retried, for `close`. */
  readonly #inFlight = new Set<Promise<void>>();
  #beat: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  constructor(options: ReceiverOptions) {
    this.verifier = createVerifier(options);
    const { idempotency, onError } = options;
    if (onError !== undefined && typeof onError !== 'function') throw new TypeError('onError must be a function');
    const logger = checkLogger(options.logger);
    this.#onError = onError ?? ((error, context) => defaultOnError(logger, error, context));
    this.#now = options.now ?? Date.now;
    if (idempotency !== undefined && idempotency !== false && (typeof idempotency !== 'object' || idempotency === null)) {
      throw new TypeError('idempotency must be an options object or false');
    }
    const settings = idempotency === false ? undefined : (idempotency ?? {});
    const store = settings === undefined ? undefined : (settings.store ?? memoryStore({ now: this.#now }));
    if (store !== undefined) {
      if (typeof store !== 'object' || store === null) throw new TypeError('idempotency.store must be a store object');
      for (const method of ['claim', 'complete', 'release'] as const) {
        if (typeof store[method] !== 'function') throw new TypeError(`idempotency.store must implement ${method}()`);
      }
      if (store.extend !== undefined && typeof store.extend !== 'function') throw new TypeError('idempotency.store extend must be a function when present');
    }
    this.#store = store;
    this.#observer = new Observer(options, store);
    observers.set(this, this.#observer);
    this.#sync = store === undefined ? undefined : syncOperations(store);
    this.#renews = typeof store?.extend === 'function';
    this.#ttlMs = positiveSeconds(settings?.ttlSeconds, 'ttlSeconds', DEFAULT_TTL_SECONDS) * 1000;
    if (settings !== undefined) checkReplayWindow(this.#ttlMs / 1000, settings.ttlSeconds === undefined, options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS);
    this.#unsignedTtlMs =
      positiveSeconds(settings?.unsignedTtlSeconds, 'unsignedTtlSeconds', Math.min(this.#ttlMs / 1000, DEFAULT_UNSIGNED_TTL_SECONDS)) * 1000;
    this.#lockMs = positiveSeconds(settings?.lockSeconds, 'lockSeconds', this.#renews ? DEFAULT_RENEWED_LOCK_SECONDS : DEFAULT_LOCK_SECONDS) * 1000;
    const namespace = settings?.namespace ?? 'default';
    if (typeof namespace === 'function') {
      this.#namespace = namespace;
      this.#signedPrefix = this.#unsignedPrefix = '';
    } else {
      const problem = namespaceProblem(namespace);
      if (problem !== undefined) throw new TypeError(`idempotency.namespace ${problem}`);
      this.#namespace = undefined;
      this.#signedPrefix = `${namespace}:s:`;
      this.#unsignedPrefix = `${namespace}:u:`;
    }
    const onStoreError = settings?.onStoreError ?? 'reject';
    if (onStoreError !== 'reject' && onStoreError !== 'process') throw new TypeError(`idempotency.onStoreError must be 'reject' or 'process'`);
    this.#processOnStoreError = onStoreError === 'process';
    if (settings !== undefined && settings.store === undefined) noteOwnMemoryStore();
    this.#fixedNamespace = typeof namespace === 'function' ? undefined : namespace;
    this.#ordering = checkOrderingOptions(options.ordering);
    if (this.#ordering !== undefined) {
      if (store === undefined) throw new TypeError('ordering needs idempotency (a store that records versions): it cannot be used with idempotency: false');
      const present = ORDERING_OPERATIONS.filter((operation) => typeof store[operation] === 'function');
      if (present.length !== ORDERING_OPERATIONS.length) {
        const name = typeof store.name === 'string' ? `the ${store.name} store` : 'idempotency.store';
        throw new TypeError(
          present.length === 0
            ? `${name} has no ordering operations (${ORDERING_OPERATIONS.join(', ')}), so it cannot refuse a stale event in the same step as its claim: use the memory, Redis, Postgres or Durable Object store with ordering`
            : `${name} has ${present.join(', ')} but not ${ORDERING_OPERATIONS.filter((operation) => !present.includes(operation)).join(', ')}: the ordering operations come all together`,
        );
      }
    }
  }

  claim(input: WebhookInput | Request, options?: ClaimOptions): Promise<Claim> {
    const deadline = options?.deadline;
    if (deadline !== undefined && (typeof deadline !== 'number' || !Number.isFinite(deadline))) {
      return Promise.reject(new TypeError('claim deadline must be a finite number of epoch milliseconds'));
    }
    const trace = this.#observer.start();
    if (trace === undefined) return this.#claim(input, undefined, deadline);
    return this.#claim(input, trace, deadline).then(
      (claim) => {
        attachTrace(claim, trace);
        if (claim.outcome === 'acquired') this.#observer.acquired(trace);
        else this.#observer.early(trace, claim.outcome);
        return claim;
      },
      (error: unknown) => {
        this.#observer.rejected(trace, error, input);
        throw error;
      },
    );
  }

  async #claim(input: WebhookInput | Request, trace: Trace | undefined, deadline: number | undefined): Promise<Claim> {
    const webhook = isRequest(input) ? await this.verifier.verifyRequest(input) : await this.verifier.verify(input);
    if (trace !== undefined) this.#observer.verified(trace, webhook, this.#now());
    const store = this.#store;
    if (store === undefined) return this.#unclaimedRun(webhook, trace);
    if (this.#closed) throw new WebhookError('STORE_UNAVAILABLE', 'this receiver is shutting down; retry later');

    // Only verified requests reach the store: forged or malformed traffic cannot fill it. Signed
    // and unsigned deliveries live in key spaces of their own, so an unsigned request with a
    // guessed id can never claim (or answer as a duplicate) the signed event of that id.
    const namespace = this.#namespaceOf(webhook);
    const key =
      this.#namespace === undefined ? (webhook.signed ? this.#signedPrefix : this.#unsignedPrefix) + webhook.id : `${namespace}:${webhook.signed ? 's' : 'u'}:${webhook.id}`;
    const lockMs = deadline === undefined ? this.#lockMs : Math.max(1, Math.min(this.#lockMs, deadline - this.#now()));
    // Ordering (issue 26): the entity and version of a signed delivery, read before the store is
    // touched; a store then judges them in the same atomic step as the claim.
    const ordered = orderingOf(this.#ordering, webhook, namespace);
    const order: EntityOrder | undefined = ordered === undefined ? undefined : { ...ordered, exclusive: this.#ordering!.exclusive };
    let result: OrderedClaimResult;
    try {
      const sync = this.#sync;
      if (order !== undefined) {
        const ttlMs = this.#ttlMs;
        const claimOrdered = () => store.claimOrdered!(key, lockMs, ttlMs, order);
        result = checkedClaim(trace !== undefined ? await this.#observer.store(trace, 'claim', claimOrdered) : await claimOrdered(), true);
      } else {
        // Untraced (the usual case), the memory store's answer is taken without a promise or a closure.
        result = checkedClaim(
          trace !== undefined
            ? await this.#observer.store(trace, 'claim', () => (sync !== undefined ? sync.claim(key, lockMs) : store.claim(key, lockMs)))
            : sync !== undefined
              ? sync.claim(key, lockMs)
              : await store.claim(key, lockMs),
          false,
        );
      }
    } catch (error) {
      // The unsigned budget is full: a refusal, never an outage to run through (issue 22).
      if (error instanceof StoreError && error.reason === 'unsigned_limit') throw unsignedLimit(error);
      // An answer outside the contract fails closed whatever onStoreError says: the store may
      // be broken in a way that lets every duplicate through.
      const contractBroken = error instanceof StoreError && error.reason === 'bad_reply';
      // Nor for an ordered delivery: run unprotected, a stale event would overwrite newer state.
      if (this.#processOnStoreError && !contractBroken && order === undefined) {
        this.#report(error, 'claim', webhook.id, false);
        return this.#unclaimedRun(webhook, trace);
      }
      if (contractBroken) this.#report(error, 'claim', webhook.id, false);
      throw new WebhookError(
        'STORE_UNAVAILABLE',
        'the idempotency store is unreachable, so this delivery cannot be deduplicated safely; retry later',
        { cause: error },
      );
    }
    if (result.status === 'completed') return this.#early('duplicate', webhook);
    if (result.status === 'stale') return this.#early('stale', webhook);
    if (result.status === 'processing') {
      const retryAfterSeconds = Math.max(1, Math.ceil((result.retryAfterMs ?? this.#lockMs) / 1000));
      return { ...this.#early('in_progress', webhook), retryAfterSeconds };
    }
    if (result.status === 'busy') {
      const retryAfterSeconds = Math.max(1, Math.ceil((result.retryAfterMs ?? this.#lockMs) / 1000));
      throw rejection('ENTITY_BUSY', `another delivery of this event's entity is being processed; retry in ${retryAfterSeconds} s`, { retryAfterSeconds });
    }

    const held = new Held(store, key, result.token, webhook.signed ? this.#ttlMs : this.#unsignedTtlMs, lockMs, webhook.id, this.#now(), deadline, order);
    held.trace = trace;
    if (this.#renews) this.#hold(held);
    let settled: Promise<void> | undefined;
    return {
      outcome: 'acquired',
      webhook,
      context: held.context,
      complete: () => (settled ??= this.#settle('complete', held)),
      release: () => (settled ??= this.#settle('release', held)),
      pending: () => held.pending,
    };
  }

  async handle<T>(
    input: WebhookInput | Request,
    handler: (webhook: VerifiedWebhook, context: WebhookContext) => T | Promise<T>,
    options?: HandleOptions,
  ): Promise<ReceiveResult<T>> {
    if (typeof handler !== 'function') throw new TypeError('handle needs a handler function');
    const claim = await this.claim(input);
    const { webhook } = claim;
    if (claim.outcome === 'duplicate') return { outcome: 'duplicate', webhook };
    if (claim.outcome === 'stale') return { outcome: 'stale', webhook };
    if (claim.outcome === 'in_progress') return { outcome: 'in_progress', webhook, retryAfterSeconds: claim.retryAfterSeconds ?? 1 };
    let value: T;
    try {
      const trace = traceOf(claim);
      value = await (trace === undefined ? handler(webhook, claim.context) : this.#observer.within(trace, () => handler(webhook, claim.context)));
    } catch (error) {
      noteAnswer(claim, undefined, error);
      await claim.release();
      throw error;
    }
    await claim.complete();
    const pending = claim.pending();
    if (pending !== undefined) options?.waitUntil?.(pending);
    return { outcome: 'processed', webhook, value };
  }

  async ping(): Promise<void> {
    const store = this.#store;
    if (store === undefined || typeof store.ping !== 'function') return;
    try {
      await store.ping();
    } catch (error) {
      throw new WebhookError('STORE_UNAVAILABLE', 'the idempotency store did not answer its readiness check', { cause: error });
    }
  }

  async close(options: CloseOptions = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) throw new RangeError('close timeoutMs must be a non-negative number of milliseconds');
    this.#closed = true;
    if (this.#beat !== undefined) clearTimeout(this.#beat);
    this.#beat = undefined;
    const reason = new Error('the webhook receiver was closed');
    for (const held of this.#held) {
      held.over = true;
      held.context.abort(reason);
    }
    this.#held.clear();
    for (const context of this.#unclaimed) context.abort(reason);
    if (this.#inFlight.size === 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...this.#inFlight]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  /** The namespace of a verified webhook: the fixed one, or the namespace function's checked answer. */
  #namespaceOf(webhook: VerifiedWebhook): string {
    const tenant = this.#namespace;
    if (tenant === undefined) return this.#fixedNamespace!;
    let namespace: unknown;
    try {
      namespace = tenant(webhook);
    } catch (error) {
      this.#namespaceFailed(error, webhook.id);
    }
    const problem = namespaceProblem(namespace);
    if (problem !== undefined) this.#namespaceFailed(new TypeError(`the idempotency namespace function's result ${problem}`), webhook.id);
    return namespace as string;
  }

  async forgetVersion(entity: string | number | bigint, options: { namespace?: string } = {}): Promise<void> {
    const store = this.#store;
    if (this.#ordering === undefined || store === undefined) throw new TypeError('forgetVersion needs a receiver built with ordering');
    const name = typeof entity === 'string' ? entity : typeof entity === 'bigint' || (typeof entity === 'number' && Number.isFinite(entity)) ? String(entity) : undefined;
    if (name === undefined || name.length === 0) throw new TypeError('forgetVersion needs the entity, as ordering.key returned it (a non-empty string, a number or a bigint)');
    const namespace = options.namespace ?? this.#fixedNamespace;
    if (namespace === undefined) throw new TypeError('forgetVersion needs options.namespace: this receiver computes its namespace per webhook');
    const problem = namespaceProblem(namespace);
    if (problem !== undefined) throw new TypeError(`forgetVersion namespace ${problem}`);
    const key = entityKey(namespace, name);
    checkEntity(key);
    try {
      await store.forgetVersion!(key);
    } catch (error) {
      throw new WebhookError('STORE_UNAVAILABLE', 'the idempotency store did not forget the version; retry later', { cause: error });
    }
  }

  #namespaceFailed(error: unknown, webhookId: string): never {
    this.#report(error, 'namespace', webhookId, false);
    throw new WebhookError('INVALID_NAMESPACE', 'the receiver could not tell which idempotency namespace this webhook belongs to; nothing was claimed', {
      cause: error,
    });
  }

  #early(outcome: 'duplicate' | 'in_progress' | 'stale', webhook: VerifiedWebhook): Claim {
    return { outcome, webhook, context: new Context(undefined), complete: noop, release: noop, pending: nothingPending };
  }

  /** A run without a claim (deduplication off, or the store down with `onStoreError: 'process'`). */
  #unclaimedRun(webhook: VerifiedWebhook, trace: Trace | undefined): Claim {
    const context = new Context(undefined);
    this.#unclaimed.add(context);
    const finish = (completed: boolean): Promise<void> => {
      this.#unclaimed.delete(context);
      // Settles once: the record ignores a second ending.
      if (trace !== undefined) this.#observer.settled(trace, completed);
      return DONE;
    };
    return { outcome: 'acquired', webhook, context, complete: () => finish(true), release: () => finish(false), pending: nothingPending };
  }

  // Renewal: one timer per receiver, not one per request, so a fast handler pays for a Set entry
  // and nothing else. It beats every sixth of the lock while any handler runs and renews each
  // claim a third of the lock after its last renewal, so a claim is renewed before half its lock
  // has gone by, and a renewal that failed (a store blip) is tried again at the next beat, some
  // four more times before the lock runs out.

  #hold(held: Held): void {
    this.#held.add(held);
    if (this.#beat === undefined) this.#arm();
  }

  #arm(): void {
    this.#beat = setTimeout(() => this.#renewDue(), this.#lockMs / 6);
    // Never keep a process alive just to renew (Node and Bun timers have unref; others return a number).
    (this.#beat as { unref?: () => void }).unref?.();
  }

  #renewDue(): void {
    this.#beat = undefined;
    const time = this.#now();
    for (const held of this.#held) {
      if (held.over) {
        this.#held.delete(held);
      } else if (completingInStore(held)) {
        // Completed in the handler's own transaction (or committing it): the row is done, so
        // there is nothing to renew and nothing to lose while the handler finishes after it.
        continue;
      } else if (held.lockEnds <= time) {
        this.#lost(held, new Error(`the claim's lock ran out before it could be renewed (lockSeconds ${this.#lockMs / 1000})`));
      } else if (held.renewAt <= time && !held.renewing) {
        void this.#renew(held, time);
      }
    }
    if (this.#held.size > 0 && !this.#closed) this.#arm();
  }

  async #renew(held: Held, time: number): Promise<void> {
    // The lock's length again, never more (a holder that dies blocks the retries for one lock, not
    // until its deadline), and never past the deadline: by then the platform stopped the handler.
    const lockMs = held.deadline === undefined ? held.lockMs : Math.min(held.lockMs, held.deadline - time);
    if (lockMs <= 0) {
      held.over = true;
      this.#held.delete(held);
      return;
    }
    held.renewing = true;
    try {
      const sync = this.#sync;
      const order = held.order;
      const extend = () =>
        order !== undefined
          ? held.store.extendOrdered!(held.key, held.token, lockMs, order)
          : sync !== undefined
            ? sync.extend(held.key, held.token, lockMs)
            : held.store.extend!(held.key, held.token, lockMs);
      const owned: unknown = held.trace === undefined ? await extend() : await this.#observer.store(held.trace, 'extend', extend);
      if (typeof owned !== 'boolean') throw badReply('extend', owned);
      if (held.over) return;
      if (owned) {
        held.lockEnds = time + lockMs;
        held.renewAt = time + held.lockMs / 3;
        return;
      }
      // A renewal that met the handler's transaction completing the claim (it waited for the
      // row, then found it completed): the claim was not lost, it was settled.
      const completion = storeCompletionOf(held);
      if (completion !== undefined && (await completion.committed)) return;
      if (!held.over) this.#lost(held, new Error('the claim was lost while its handler ran (its lock expired and another delivery may have taken the id over)'));
    } catch (error) {
      if (held.over) return;
      // Tried again at the next beat, while the lock lasts; the beat that finds it run out aborts.
      this.#report(error, 'renew', held.webhookId, true);
    } finally {
      held.renewing = false;
    }
  }

  #lost(held: Held, error: Error): void {
    held.over = true;
    this.#held.delete(held);
    this.#report(error, 'renew', held.webhookId, false);
    held.context.abort(error);
  }

  /** One attempt to complete or release; a failed completion goes on in the background. */
  #settle(stage: 'complete' | 'release', held: Held): Promise<void> {
    held.over = true;
    this.#held.delete(held);
    const trace = held.trace;
    if (stage === 'complete' && isCompletedByStore(held)) {
      // Committed with the handler's side effect, in its transaction: nothing left to send.
      if (trace !== undefined) this.#observer.settled(trace, true);
      return DONE;
    }
    const sync = this.#sync;
    if (sync === undefined || held.order !== undefined) return this.#settleAsync(stage, held);
    try {
      // A closure only when traced: the untraced memory-store path allocates nothing here.
      const owned = trace === undefined ? settleSync(sync, stage, held) : this.#observer.store(trace, stage, () => settleSync(sync, stage, held));
      if (!owned) this.#reportExpired(stage, held.webhookId);
    } catch (error) {
      this.#settleFailed(error, stage, held);
    }
    // The outcome is the handler's, whatever the store did with it; the span covers the settlement.
    if (trace !== undefined) this.#observer.settled(trace, stage === 'complete');
    return DONE;
  }

  async #settleAsync(stage: 'complete' | 'release', held: Held): Promise<void> {
    try {
      const trace = held.trace;
      // Untraced (the usual case): the store is called without a closure around it.
      const owned: unknown =
        trace === undefined ? await settleAsync(stage, held) : await this.#observer.store(trace, stage, () => settleAsync(stage, held));
      if (typeof owned !== 'boolean') {
        this.#report(badReply(stage, owned), stage, held.webhookId, false);
        return;
      }
      if (!owned) this.#reportExpired(stage, held.webhookId);
    } catch (error) {
      this.#settleFailed(error, stage, held);
    } finally {
      if (held.trace !== undefined) this.#observer.settled(held.trace, stage === 'complete');
    }
  }

  #settleFailed(error: unknown, stage: 'complete' | 'release', held: Held): void {
    // A failed release needs no retry: the lock expires by itself and the sender's retry runs.
    // A failed completion does: until it lands, the id looks in flight and, once the lock
    // expires, a duplicate would run the handler a second time.
    const retry = stage === 'complete' && this.#now() + COMPLETE_RETRY_FIRST_MS < held.lockEnds;
    this.#report(error, stage, held.webhookId, retry);
    if (!retry) return;
    const pending = this.#retryCompletion(held);
    held.pending = pending;
    this.#inFlight.add(pending);
    void pending.finally(() => this.#inFlight.delete(pending));
  }

  async #retryCompletion(held: Held): Promise<void> {
    let delay = COMPLETE_RETRY_FIRST_MS;
    for (let attempts = 1; ; attempts++) {
      await sleep(delay);
      try {
        // Timed like the first attempt: retries during an outage belong in the store's latency.
        const owned: unknown = await this.#observer.store(held.trace, 'complete', () => settleAsync('complete', held));
        if (typeof owned !== 'boolean') this.#report(badReply('complete', owned), 'complete', held.webhookId, false);
        // The store's contract makes a completion idempotent for its own token, so a first attempt
        // that timed out but landed late answers true here, not "taken over".
        else if (!owned) this.#reportExpired('complete', held.webhookId);
        return;
      } catch (error) {
        delay = Math.min(delay * 2, COMPLETE_RETRY_MAX_MS);
        if (this.#closed || this.#now() + delay >= held.lockEnds) {
          this.#report(new Error(`gave up completing after ${attempts + 1} attempts: ${errorText(error)}`, { cause: error }), 'complete', held.webhookId, false);
          return;
        }
      }
    }
  }

  #reportExpired(stage: 'complete' | 'release', webhookId: string): void {
    const why = this.#renews
      ? 'its renewal failed for longer than the lock'
      : `the handler ran longer than lockSeconds, ${this.#lockMs / 1000} s, and the store cannot renew claims`;
    this.#report(new Error(`the claim expired before ${stage} (${why}) and may have been taken over`), stage, webhookId, false);
  }

  #report(error: unknown, stage: ReceiverErrorContext['stage'], webhookId: string, willRetry: boolean): void {
    try {
      this.#onError(error, { stage, webhookId, willRetry });
    } catch {
      // A throwing logger must not turn a processed webhook into a failure.
    }
  }
}

function settleAsync(stage: 'complete' | 'release', held: Held): Promise<boolean> {
  const order = held.order;
  // Ordering: the completion records the entity's version, and either frees its lock.
  if (order !== undefined) {
    return stage === 'complete' ? held.store.completeOrdered!(held.key, held.token, held.ttlMs, order) : held.store.releaseOrdered!(held.key, held.token, order);
  }
  return stage === 'complete' ? held.store.complete(held.key, held.token, held.ttlMs) : held.store.release(held.key, held.token);
}

function settleSync(sync: SyncOperations, stage: 'complete' | 'release', held: Held): boolean {
  return stage === 'complete' ? sync.complete(held.key, held.token, held.ttlMs) : sync.release(held.key, held.token);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    // Never keep a process alive just to retry (Node and Bun timers have unref; others return a number).
    (timer as { unref?: () => void }).unref?.();
  });
}

/**
 * A receiver made its own memory store: built once per process that is right, built per request
 * it silently deduplicates nothing. Warn once, naming the fix.
 */
function noteOwnMemoryStore(): void {
  receiversWithOwnMemoryStore++;
  if (receiversWithOwnMemoryStore < MANY_RECEIVERS || warnedAboutManyReceivers) return;
  warnedAboutManyReceivers = true;
  console.warn(
    `[webhook-receiver] ${MANY_RECEIVERS} receivers were built in this process, each with a memory store of its own, so ` +
      'none of them sees the ids the others claimed and deduplication does not work. Build the receiver (or the ' +
      "adapter's handler) once, at module scope or lazily on first use, not per request; or pass one shared " +
      'idempotency.store (memoryStore() or a shared store such as redisStore).',
  );
}

/**
 * Creates a receiver: a verifier plus idempotency on `webhook-id` (on by default, in memory).
 * Build it once per endpoint, not per request: each receiver has its own memory store by default.
 *
 * @example
 * ```ts
 * import { createReceiver } from 'webhook-receiver';
 * import { redisStore } from 'webhook-receiver/redis';
 *
 * const receiver = createReceiver({
 *   secrets: process.env.WEBHOOK_SECRET!,
 *   idempotency: { store: redisStore({ client: redis }), ttlSeconds: 3 * 86_400 },
 * });
 *
 * const result = await receiver.handle(request, async (webhook, context) => {
 *   await orders.markPaid(webhook.json<{ orderId: string }>().orderId, { signal: context.signal });
 * });
 * // result.outcome: 'processed' | 'duplicate' | 'in_progress'
 * ```
 */
export function createReceiver(options: ReceiverOptions): Receiver {
  return new ReceiverImpl(options);
}
