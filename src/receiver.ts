/**
 * verify -> claim -> run the handler (renewing the claim while it runs) -> complete (success) or
 * release (failure).
 *
 * Delivery is at-least-once and `webhook-id` is the idempotency key, so a handler runs to success
 * at most once per id, and a handler that fails releases its claim so the sender's retry runs it.
 * What counts is the handler's result, never the connection: a sender that timed out and left
 * still gets a successful run completed, so its retry is answered as a duplicate (issue 11).
 *
 * This file is the receiver's public face: it checks the options, verifies, claims and runs the
 * handler. Its parts live in `receiver/`: the public types and defaults (`types.ts`, below all the
 * others), the options' checks (`settings.ts`), the handler's context (`context.ts`) and the claim
 * protocol once a claim is acquired: renew, settle, retry the completion (`claims.ts`).
 */

import { unsignedLimit, WebhookError } from './errors.ts';
import { checkLogger } from './logger.ts';
import { attachTrace, noteAnswer, Observer, traceOf, type Trace } from './telemetry.ts';
import { memoryStore } from './stores/memory.ts';
import { syncOperations, type SyncOperations } from './stores/internal.ts';
import { StoreError, type ClaimResult, type IdempotencyStore } from './stores/types.ts';
import { createVerifier, DEFAULT_TOLERANCE_SECONDS, type VerifiedWebhook, type Verifier, type VerifierOptions, type WebhookInput } from './verify.ts';
import { ClaimKeeper, DONE, Held, checkedClaim, type Report, type Subject } from './receiver/claims.ts';
import { Context } from './receiver/context.ts';
import { checkReplayWindow, defaultOnError, namespaceProblem, noteOwnMemoryStore, positiveSeconds, tenantNamespace } from './receiver/settings.ts';
import {
  DEFAULT_LOCK_SECONDS,
  DEFAULT_RENEWED_LOCK_SECONDS,
  DEFAULT_TTL_SECONDS,
  DEFAULT_UNSIGNED_TTL_SECONDS,
  type Claim,
  type ClaimOptions,
  type CloseOptions,
  type HandleOptions,
  type ReceiveResult,
  type Receiver,
  type ReceiverErrorContext,
  type ReceiverOptions,
  type WebhookContext,
} from './receiver/types.ts';

// The public types and defaults, from the room below the receiver's parts.
export * from './receiver/types.ts';

const DEFAULT_CLOSE_TIMEOUT_MS = 5000;
const noop = (): Promise<void> => DONE;
const nothingPending = (): undefined => undefined;
const subjectOf = (webhook: VerifiedWebhook): Subject => ({ webhookId: webhook.id, tenant: webhook.tenant });

/** Each receiver's observer, for the adapters' shared flow (`observerOf`). */
const observers = new WeakMap<Receiver, Observer>();

/**
 * The observer of a receiver built by {@link createReceiver}: the adapters' shared flow reports
 * the rejections it makes itself through it. Internal.
 */
export function observerOf(receiver: Receiver): Observer | undefined {
  return observers.get(receiver);
}

function isRequest(input: WebhookInput | Request): input is Request {
  return typeof (input as Request).arrayBuffer === 'function' && typeof (input as Request).method === 'string';
}

class ReceiverImpl implements Receiver {
  readonly verifier: Verifier;
  readonly #store: IdempotencyStore | undefined;
  /** The store's operations without their promises, when it has them (the memory store). */
  readonly #sync: SyncOperations | undefined;
  /** The acquired claims: renewal, settlement, completion retries. */
  readonly #claims: ClaimKeeper;
  readonly #ttlMs: number;
  readonly #unsignedTtlMs: number;
  readonly #lockMs: number;
  /** The namespace function, or undefined with a fixed namespace. */
  readonly #namespace: ((webhook: VerifiedWebhook) => string) | undefined;
  /** With a fixed namespace: `${namespace}:s:` and `${namespace}:u:`. */
  readonly #signedPrefix: string;
  readonly #unsignedPrefix: string;
  readonly #processOnStoreError: boolean;
  readonly #onError: (error: unknown, context: ReceiverErrorContext) => void;
  readonly #observer: Observer;
  readonly #now: () => number;
  /** Contexts of handlers running without a claim, for `close`. */
  readonly #unclaimed = new Set<Context>();
  #closed = false;

  constructor(options: ReceiverOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError('createReceiver needs an options object with secrets or keys');
    const { keys } = options;
    if (keys !== undefined) {
      if (options.secrets !== undefined) {
        throw new TypeError('pass either secrets (one set of keys) or keys (keys per tenant, from tenantKeys()), not both');
      }
      if (typeof keys !== 'object' || keys === null || typeof keys.verifier !== 'function' || typeof keys.forget !== 'function') {
        throw new TypeError('keys must be the object tenantKeys() returns');
      }
      this.verifier = keys.verifier(options);
    } else {
      this.verifier = createVerifier(options as VerifierOptions);
    }
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
    const renews = typeof store?.extend === 'function';
    this.#ttlMs = positiveSeconds(settings?.ttlSeconds, 'ttlSeconds', DEFAULT_TTL_SECONDS) * 1000;
    if (settings !== undefined) checkReplayWindow(this.#ttlMs / 1000, settings.ttlSeconds === undefined, options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS);
    this.#unsignedTtlMs =
      positiveSeconds(settings?.unsignedTtlSeconds, 'unsignedTtlSeconds', Math.min(this.#ttlMs / 1000, DEFAULT_UNSIGNED_TTL_SECONDS)) * 1000;
    this.#lockMs = positiveSeconds(settings?.lockSeconds, 'lockSeconds', renews ? DEFAULT_RENEWED_LOCK_SECONDS : DEFAULT_LOCK_SECONDS) * 1000;
    const namespace = keys === undefined ? (settings?.namespace ?? 'default') : tenantNamespace(settings?.namespace);
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
    const report: Report = (error, stage, subject, willRetry) => this.#report(error, stage, subject, willRetry);
    this.#claims = new ClaimKeeper({ sync: this.#sync, observer: this.#observer, now: this.#now, lockMs: this.#lockMs, renews, report });
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
    const key = this.#key(webhook);
    const lockMs = deadline === undefined ? this.#lockMs : Math.max(1, Math.min(this.#lockMs, deadline - this.#now()));
    let result: ClaimResult;
    try {
      const sync = this.#sync;
      // Untraced (the usual case), the memory store's answer is taken without a promise or a closure.
      result = checkedClaim(
        trace !== undefined
          ? await this.#observer.store(trace, 'claim', () => (sync !== undefined ? sync.claim(key, lockMs) : store.claim(key, lockMs)))
          : sync !== undefined
            ? sync.claim(key, lockMs)
            : await store.claim(key, lockMs),
      );
    } catch (error) {
      // The unsigned budget is full: a refusal, never an outage to run through (issue 22).
      if (error instanceof StoreError && error.reason === 'unsigned_limit') throw unsignedLimit(error);
      // An answer outside the contract fails closed whatever onStoreError says: the store may
      // be broken in a way that lets every duplicate through.
      const contractBroken = error instanceof StoreError && error.reason === 'bad_reply';
      if (this.#processOnStoreError && !contractBroken) {
        this.#report(error, 'claim', subjectOf(webhook), false);
        return this.#unclaimedRun(webhook, trace);
      }
      if (contractBroken) this.#report(error, 'claim', subjectOf(webhook), false);
      throw new WebhookError(
        'STORE_UNAVAILABLE',
        'the idempotency store is unreachable, so this delivery cannot be deduplicated safely; retry later',
        { cause: error },
      );
    }
    if (result.status === 'completed') return this.#early('duplicate', webhook);
    if (result.status === 'processing') {
      const retryAfterSeconds = Math.max(1, Math.ceil((result.retryAfterMs ?? this.#lockMs) / 1000));
      return { ...this.#early('in_progress', webhook), retryAfterSeconds };
    }

    const held = new Held(store, key, result.token, webhook.signed ? this.#ttlMs : this.#unsignedTtlMs, lockMs, webhook.id, webhook.tenant, this.#now(), deadline);
    held.trace = trace;
    this.#claims.hold(held);
    let settled: Promise<void> | undefined;
    return {
      outcome: 'acquired',
      webhook,
      context: held.context,
      complete: () => (settled ??= this.#claims.settle('complete', held)),
      release: () => (settled ??= this.#claims.settle('release', held)),
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
    const reason = new Error('the webhook receiver was closed');
    const inFlight = this.#claims.close(reason);
    for (const context of this.#unclaimed) context.abort(reason);
    if (inFlight.length === 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled(inFlight),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  /** The store key of a verified webhook: `${namespace}:s:${id}` or `${namespace}:u:${id}`. */
  #key(webhook: VerifiedWebhook): string {
    const tenant = this.#namespace;
    if (tenant === undefined) return (webhook.signed ? this.#signedPrefix : this.#unsignedPrefix) + webhook.id;
    let namespace: unknown;
    try {
      namespace = tenant(webhook);
    } catch (error) {
      this.#namespaceFailed(error, webhook);
    }
    const problem = namespaceProblem(namespace);
    if (problem !== undefined) this.#namespaceFailed(new TypeError(`the idempotency namespace function's result ${problem}`), webhook);
    return `${namespace as string}:${webhook.signed ? 's' : 'u'}:${webhook.id}`;
  }

  #namespaceFailed(error: unknown, webhook: VerifiedWebhook): never {
    this.#report(error, 'namespace', subjectOf(webhook), false);
    throw new WebhookError('INVALID_NAMESPACE', 'the receiver could not tell which idempotency namespace this webhook belongs to; nothing was claimed', {
      cause: error,
    });
  }

  #early(outcome: 'duplicate' | 'in_progress', webhook: VerifiedWebhook): Claim {
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

  #report(error: unknown, stage: ReceiverErrorContext['stage'], { webhookId, tenant }: Subject, willRetry: boolean): void {
    try {
      this.#onError(error, tenant === undefined ? { stage, webhookId, willRetry } : { stage, webhookId, willRetry, tenant });
    } catch {
      // A throwing logger must not turn a processed webhook into a failure.
    }
  }
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

