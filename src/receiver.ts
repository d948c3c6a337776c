/**
 * verify -> claim -> run the handler (renewing the claim while it runs) -> complete (success) or
 * release (failure).
 *
 * Delivery is at-least-once and `webhook-id` is the idempotency key, so a handler runs to success
 * at most once per id, and a handler that fails releases its claim so the sender's retry runs it.
 * What counts is the handler's result, never the connection: a sender that timed out and left
 * still gets a successful run completed, so its retry is answered as a duplicate.
 *
 * This file is the receiver's public face: it checks the options, verifies, claims and runs the
 * handler. Its parts live in `receiver/`: the public types and defaults (`types.ts`, below all the
 * others), the options' checks (`settings.ts`), accepting into an inbox (`accept.ts`),
 * ordering's store check and `forgetVersion` (`ordering-store.ts`), what is read of a request
 * before it is verified (`input.ts`), and the ways in for the adapters' flow and for pulled events
 * (`entries.ts`). Beside it in `src/`, below both the receiver and an inbox's
 * workers: the claim protocol once a claim is acquired: renew, settle, retry the completion
 * (`claims.ts`), the handler's context (`context.ts`) and the job format (`job-format.ts`). The
 * receiver imports nothing from `inbox/`: an inbox hands itself in as an `InboxIntake`.
 */

import { handlerFailure, rejection, unsignedLimit, WebhookError } from './errors.ts';
import { checkLogger } from './logger.ts';
import { checkOrderingOptions, orderingOf, type Ordering } from './ordering.ts';
import { attachTrace, noteAnswer, Observer, traceOf, type Trace } from './telemetry.ts';
import { memoryStore } from './stores/memory/index.ts';
import { checkStore } from './stores/internal.ts';
import { StoreError, type EntityOrder, type IdempotencyStore, type OrderedClaimResult } from './stores/types.ts';
import { createVerifier, DEFAULT_TOLERANCE_SECONDS, type VerifiedWebhook, type Verifier, type VerifierOptions, type WebhookInput } from './verify.ts';
import { ClaimKeeper, DONE, Held, StoreCalls, checkedClaim, isPending, type Report, type Subject } from './claims.ts';
import { HandlerContext } from './context.ts';
import { checkOrderingStore, forgetOrderedVersion } from './receiver/ordering-store.ts';
import { contentTypeOf, isRequest } from './receiver/input.ts';
import { observers, pulledEntries } from './receiver/entries.ts';
import { defaultOnError, durationsOf, namespaceProblem, namespaceSetting, noteOwnMemoryStore, processesOnStoreError, verifierOf } from './receiver/settings.ts';
import { acceptClaimed, InboxGate, type ClaimedDelivery } from './receiver/accept.ts';
import {
  type AcceptResult,
  type Claim,
  type ClaimOptions,
  type CloseOptions,
  type HandleOptions,
  type InboxIntake,
  type ReceiveResult,
  type Receiver,
  type ReceiverErrorContext,
  type ReceiverOptions,
  type WebhookContext,
} from './receiver/types.ts';

// The public types and defaults, from the module the receiver's parts import them from.
export * from './receiver/types.ts';

const DEFAULT_CLOSE_TIMEOUT_MS = 5000;
/** The input of a pulled event's claim: there is no request, and the telemetry reads no id from it. */
const PULLED: WebhookInput = { headers: {}, body: new Uint8Array(0) };
const noop = (): Promise<void> => DONE;
const nothingPending = (): undefined => undefined;
const subjectOf = (webhook: VerifiedWebhook): Subject => ({ webhookId: webhook.id, tenant: webhook.tenant });

/**
 * What an inbox's accept learns from its claim: the namespace the claim is in (or would be in,
 * when the delivery runs unclaimed), and the delivery's entity and version, when ordered.
 */
interface Accepting {
  namespace: string;
  order: EntityOrder | undefined;
}

class ReceiverImpl implements Receiver {
  readonly verifier: Verifier;
  readonly inbox: InboxIntake | undefined;
  /** The inbox behind its guard (backlog, timeout), with one. */
  readonly #gate: InboxGate | undefined;
  readonly #store: IdempotencyStore | undefined;
  /** How the store is called (the memory store's answers without promises); `undefined` without idempotency. */
  readonly #calls: StoreCalls | undefined;
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
  /** Ordering, checked; `undefined` without it. */
  readonly #ordering: Ordering | undefined;
  /** The fixed namespace, or undefined with a namespace function. */
  readonly #fixedNamespace: string | undefined;
  readonly #onError: (error: unknown, context: ReceiverErrorContext) => void;
  readonly #observer: Observer;
  readonly #now: () => number;
  readonly #acceptsUnsigned: boolean;
  /** Contexts of handlers running without a claim, for `close`. */
  readonly #unclaimed = new Set<HandlerContext>();
  #closed = false;

  constructor(options: ReceiverOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError('createReceiver needs an options object with secrets or keys');
    const { keys } = options;
    this.verifier = verifierOf(options);
    this.#gate = options.inbox === undefined ? undefined : new InboxGate(options.inbox);
    this.inbox = this.#gate?.inbox;
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
    if (store !== undefined) checkStore(store, 'idempotency.store');
    this.#store = store;
    this.#observer = new Observer(options, store);
    observers.set(this, this.#observer);
    this.#calls = store === undefined ? undefined : new StoreCalls(store);
    const renews = this.#calls?.renews ?? false;
    ({ ttlMs: this.#ttlMs, unsignedTtlMs: this.#unsignedTtlMs, lockMs: this.#lockMs } = durationsOf(settings, renews, options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS));
    const namespace = namespaceSetting(keys, settings);
    this.#namespace = typeof namespace === 'function' ? namespace : undefined;
    this.#fixedNamespace = typeof namespace === 'function' ? undefined : namespace;
    this.#signedPrefix = typeof namespace === 'function' ? '' : `${namespace}:s:`;
    this.#unsignedPrefix = typeof namespace === 'function' ? '' : `${namespace}:u:`;
    this.#processOnStoreError = processesOnStoreError(settings);
    if (settings !== undefined && settings.store === undefined) noteOwnMemoryStore();
    this.#ordering = checkOrderingOptions(options.ordering);
    if (this.#ordering !== undefined) checkOrderingStore(store);
    const report: Report = (error, stage, subject, willRetry) => this.#report(error, stage, subject, willRetry);
    this.#claims = new ClaimKeeper({ calls: this.#calls, observer: this.#observer, now: this.#now, lockMs: this.#lockMs, report });
    this.#acceptsUnsigned = options.unsigned === 'accept';
    pulledEntries.set(this, {
      hasInbox: this.#gate !== undefined,
      handle: (webhook, handler) => this.#handle(this.#traced(PULLED, undefined, undefined, webhook), handler, undefined),
      accept: (webhook, contentType) => this.#accept(PULLED, { webhook, contentType }),
    });
  }

  claim(input: WebhookInput | Request, options?: ClaimOptions): Promise<Claim> {
    const deadline = options?.deadline;
    if (deadline !== undefined && (typeof deadline !== 'number' || !Number.isFinite(deadline))) {
      return Promise.reject(new TypeError('claim deadline must be a finite number of epoch milliseconds'));
    }
    return this.#traced(input, deadline, undefined);
  }

  /** {@link claim}, observed; `accepting` and `pulled` as in {@link #claim}. */
  #traced(input: WebhookInput | Request, deadline: number | undefined, accepting: Accepting | undefined, pulled?: VerifiedWebhook): Promise<Claim> {
    const trace = this.#observer.start();
    if (trace === undefined) return this.#claim(input, undefined, deadline, accepting, pulled);
    return this.#claim(input, trace, deadline, accepting, pulled).then(
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

  /**
   * Verifies and claims. `accepting` (an inbox's accept): the claim is unordered (an accepted job
   * is never stale: its staleness is judged when a worker processes it, where a newer version may
   * still be queued), and the delivery's entity and version go to `accepting.order` for the job.
   * `pulled`: an event pulled from the relay, taken as it is instead of verifying `input`; an
   * unsigned one (`unattempted`) is refused as an unsigned request is, unless unsigned is accepted.
   */
  async #claim(input: WebhookInput | Request, trace: Trace | undefined, deadline: number | undefined, accepting?: Accepting, pulled?: VerifiedWebhook): Promise<Claim> {
    if (pulled !== undefined && !pulled.signed && !this.#acceptsUnsigned) {
      throw new WebhookError('MISSING_SIGNATURE', "the relay did not check this event's signature when it captured it (unattempted), and this receiver does not accept unsigned events (unsigned: 'accept')");
    }
    const webhook = pulled ?? (isRequest(input) ? await this.verifier.verifyRequest(input) : await this.verifier.verify(input));
    if (trace !== undefined) this.#observer.verified(trace, webhook, this.#now());
    const calls = this.#calls;
    if (calls === undefined) {
      // Deduplication off: the job still goes to the namespace a claim would use, so two tenants'
      // deliveries of one id stay two jobs.
      if (accepting !== undefined) accepting.namespace = this.#namespaceOf(webhook);
      return this.#unclaimedRun(webhook, trace);
    }
    if (this.#closed) throw new WebhookError('STORE_UNAVAILABLE', 'this receiver is shutting down; retry later');

    // Only verified requests reach the store: forged or malformed traffic cannot fill it. Signed
    // and unsigned deliveries live in key spaces of their own, so an unsigned request with a
    // guessed id can never claim (or answer as a duplicate) the signed event of that id.
    const namespace = this.#namespaceOf(webhook);
    const key =
      this.#namespace === undefined ? (webhook.signed ? this.#signedPrefix : this.#unsignedPrefix) + webhook.id : `${namespace}:${webhook.signed ? 's' : 'u'}:${webhook.id}`;
    const lockMs = deadline === undefined ? this.#lockMs : Math.max(1, Math.min(this.#lockMs, deadline - this.#now()));
    // Ordering: the entity and version of a signed delivery, read before the store is
    // touched; the store judges them in the same atomic step as the claim.
    const ordered = orderingOf(this.#ordering, webhook, namespace);
    let order: EntityOrder | undefined = ordered === undefined ? undefined : { ...ordered, exclusive: this.#ordering!.exclusive };
    if (accepting !== undefined) {
      // Known before the store is asked: a delivery run unclaimed through a store outage
      // (`onStoreError: 'process'`) is filed where its claim would have been, so its job id is
      // the one the sender's retry after the outage finds, and tenants stay apart.
      accepting.namespace = namespace;
      accepting.order = order;
      order = undefined;
    }
    let result: OrderedClaimResult;
    try {
      if (order !== undefined) {
        const ttlMs = this.#ttlMs;
        const claimOrdered = () => calls.claimOrdered(key, lockMs, ttlMs, order);
        result = checkedClaim(trace !== undefined ? await this.#observer.store(trace, 'claim', claimOrdered) : await claimOrdered(), true);
      } else if (trace !== undefined) {
        result = checkedClaim(await this.#observer.store(trace, 'claim', () => calls.claim(key, lockMs)));
      } else {
        // Untraced (the usual case), the memory store's answer is taken without a promise or a closure.
        const answer = calls.claim(key, lockMs);
        result = checkedClaim(isPending(answer) ? await answer : answer);
      }
    } catch (error) {
      // The unsigned budget is full: a refusal, never an outage to run through.
      if (error instanceof StoreError && error.reason === 'unsigned_limit') throw unsignedLimit(error);
      // An answer outside the contract fails closed whatever onStoreError says: the store may
      // be broken in a way that lets every duplicate through.
      const contractBroken = error instanceof StoreError && error.reason === 'bad_reply';
      // Nor for an ordered delivery: run unprotected, a stale event would overwrite newer state.
      // (An inbox's accept claims unordered: its job goes on carrying the entity, judged by the worker.)
      if (this.#processOnStoreError && !contractBroken && order === undefined) {
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
    if (result.status === 'stale') return this.#early('stale', webhook);
    if (result.status === 'processing') {
      const retryAfterSeconds = Math.max(1, Math.ceil((result.retryAfterMs ?? this.#lockMs) / 1000));
      return { ...this.#early('in_progress', webhook), retryAfterSeconds };
    }
    if (result.status === 'busy') {
      const retryAfterSeconds = Math.max(1, Math.ceil((result.retryAfterMs ?? this.#lockMs) / 1000));
      throw rejection('ENTITY_BUSY', `another delivery of this event's entity is being processed; retry in ${retryAfterSeconds} s`, { retryAfterSeconds });
    }

    const held = new Held(calls.store, key, result.token, webhook.signed ? this.#ttlMs : this.#unsignedTtlMs, lockMs, webhook.id, webhook.tenant, this.#now(), deadline, order);
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

  // Not async itself: the one async layer per request is #handle's (a second would add a promise
  // and microtask turns to every delivery). Misuse still rejects, as it did when this was async.
  handle<T>(
    input: WebhookInput | Request,
    handler: (webhook: VerifiedWebhook, context: WebhookContext) => T | Promise<T>,
    options?: HandleOptions,
  ): Promise<ReceiveResult<T>> {
    if (this.#gate !== undefined) {
      return Promise.reject(new TypeError('this receiver was built with an inbox: receiver.accept(request) enqueues the delivery, and inbox.work(handler) runs the handler'));
    }
    if (typeof handler !== 'function') return Promise.reject(new TypeError('handle needs a handler function'));
    return this.#handle(this.claim(input), handler, options);
  }

  async #handle<T>(claiming: Promise<Claim>, handler: (webhook: VerifiedWebhook, context: WebhookContext) => T | Promise<T>, options: HandleOptions | undefined): Promise<ReceiveResult<T>> {
    const claim = await claiming;
    const { webhook } = claim;
    if (claim.outcome === 'duplicate') return { outcome: 'duplicate', webhook };
    if (claim.outcome === 'stale') return { outcome: 'stale', webhook };
    if (claim.outcome === 'in_progress') return { outcome: 'in_progress', webhook, retryAfterSeconds: claim.retryAfterSeconds ?? 1 };
    let value: T;
    try {
      const trace = traceOf(claim);
      value = await (trace === undefined ? handler(webhook, claim.context) : this.#observer.within(trace, () => handler(webhook, claim.context)));
    } catch (error) {
      const failure = handlerFailure(error);
      noteAnswer(claim, undefined, failure);
      await claim.release();
      throw failure;
    }
    await claim.complete();
    const pending = claim.pending();
    if (pending !== undefined) options?.waitUntil?.(pending);
    return { outcome: 'processed', webhook, value };
  }

  // Not async itself, as handle is not: #accept is the one async layer per request.
  accept(input: WebhookInput | Request): Promise<AcceptResult> {
    if (this.#gate === undefined) {
      return Promise.reject(new TypeError('receiver.accept needs an inbox: createReceiver({ secrets, inbox }); without one, receiver.handle(request, handler) runs the handler'));
    }
    return this.#accept(input, undefined);
  }

  /** Accepts a request (its content type read from it once verified), or a pulled event with the content type the relay gave it. */
  async #accept(input: WebhookInput | Request, pulled: { webhook: VerifiedWebhook; contentType: string | null } | undefined): Promise<AcceptResult> {
    const gate = this.#gate;
    if (gate === undefined) throw new TypeError('this receiver has no inbox');
    // The accepting claim is unordered (never stale): the worker judges the job's entity and version.
    const accepting: Accepting = { namespace: 'default', order: undefined };
    const claim = (await this.#traced(input, undefined, accepting, pulled?.webhook)) as ClaimedDelivery;
    return acceptClaimed(gate, claim, pulled === undefined ? contentTypeOf(input) : pulled.contentType, accepting.namespace, accepting.order);
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

  /** The namespace of a verified webhook: the fixed one, or the namespace function's checked answer. */
  #namespaceOf(webhook: VerifiedWebhook): string {
    const tenant = this.#namespace;
    if (tenant === undefined) return this.#fixedNamespace!;
    let namespace: unknown;
    try {
      namespace = tenant(webhook);
    } catch (error) {
      this.#namespaceFailed(error, webhook);
    }
    const problem = namespaceProblem(namespace);
    if (problem !== undefined) this.#namespaceFailed(new TypeError(`the idempotency namespace function's result ${problem}`), webhook);
    return namespace as string;
  }

  forgetVersion(entity: string | number | bigint, options: { namespace?: string } = {}): Promise<void> {
    return forgetOrderedVersion(this.#store, this.#ordering, this.#fixedNamespace, entity, options);
  }

  #namespaceFailed(error: unknown, webhook: VerifiedWebhook): never {
    this.#report(error, 'namespace', subjectOf(webhook), false);
    throw new WebhookError('INVALID_NAMESPACE', 'the receiver could not tell which idempotency namespace this webhook belongs to; nothing was claimed', {
      cause: error,
    });
  }

  #early(outcome: 'duplicate' | 'in_progress' | 'stale', webhook: VerifiedWebhook): Claim {
    return { outcome, webhook, context: new HandlerContext(undefined), complete: noop, release: noop, pending: nothingPending };
  }

  /** A run without a claim (deduplication off, or the store down with `onStoreError: 'process'`). */
  #unclaimedRun(webhook: VerifiedWebhook, trace: Trace | undefined): Claim {
    const context = new HandlerContext(undefined);
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
 * // result.outcome: 'processed' | 'duplicate' | 'in_progress' (and 'stale' with ordering)
 * ```
 */
export function createReceiver(options: ReceiverOptions): Receiver {
  return new ReceiverImpl(options);
}

