/**
 * The claim protocol, once a claim is acquired: renew it while its handler runs (one timer per
 * keeper), settle it (complete on success, release on failure), and retry a completion that
 * failed until it lands or the lock runs out. Every store failure goes to the keeper's report.
 *
 * Below both the receiver (a delivery's claim, key classes `s` and `u`) and an inbox's workers (a
 * job's claim, key class `w`): each builds on it, and neither imports the other.
 */

import { HandlerContext } from './context.ts';
import { errorText } from './errors.ts';
import { LinkedSet } from './lib/linked-set.ts';
import type { Observer, Trace } from './telemetry.ts';
import { completingInStore, isCompletedByStore, storeCompletionOf, syncOperations, type SyncOperations } from './stores/internal.ts';
import { StoreError, type ClaimHandle, type ClaimResult, type EntityOrder, type IdempotencyStore, type OrderedClaimResult, type OrderingOperations } from './stores/types.ts';

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

/** A failed completion is retried after 100 ms, then with the delay doubling up to 2 s. */
const COMPLETE_RETRY_FIRST_MS = 100;
const COMPLETE_RETRY_MAX_MS = 2000;

/** What `complete` and `release` return when there is nothing to wait for. */
export const DONE: Promise<void> = Promise.resolve();

/** A store answer outside the contract: fail closed. */
function badReply(operation: string, reply: unknown): StoreError {
  const shown = reply === null ? 'null' : typeof reply === 'object' ? JSON.stringify(Object.keys(reply as object)) : typeof reply;
  return new StoreError('custom', 'bad_reply', `the idempotency store answered ${operation} outside its contract (${shown}); the delivery was refused rather than run unprotected`);
}

/**
 * The claim result, checked against the contract (a custom store may answer anything); `stale`
 * and `busy` only from `claimOrdered` (`ordered`).
 */
export function checkedClaim(result: unknown, ordered = false): OrderedClaimResult {
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

/** `true` when a store's answer is still on its way (a promise), `false` when it came at once. */
export function isPending<T>(answer: T | PromiseLike<T>): answer is PromiseLike<T> {
  // A boolean or a claim result from the memory store is settled by the first test or the last.
  const kind = typeof answer;
  return (kind === 'object' || kind === 'function') && answer !== null && typeof (answer as { then?: unknown }).then === 'function';
}

/**
 * How the receiver, an inbox's workers and their keeper call one store, resolved once when they
 * are built: its ordering operations, whether it renews claims, and, for a store that answers at
 * once (the memory store), its synchronous operations. Those answer without a promise, which
 * saves a promise and a turn of the microtask queue on every claim and every settlement; the
 * callers take an answer that is not {@link isPending} as it is, and await one that is.
 */
export class StoreCalls {
  readonly store: IdempotencyStore;
  /** The store's ordering operations, checked whole by the receiver or the worker. */
  readonly ordering: OrderingOperations | undefined;
  /** The store has `extend`: claims are renewed while their handler runs. */
  readonly renews: boolean;
  readonly #sync: SyncOperations | undefined;

  constructor(store: IdempotencyStore) {
    this.store = store;
    this.ordering = store.ordering;
    this.renews = typeof store.extend === 'function';
    this.#sync = syncOperations(store);
  }

  /** `claim`: at once from the memory store, a promise from any other. */
  claim(key: string, lockMs: number): ClaimResult | Promise<ClaimResult> {
    const sync = this.#sync;
    return sync !== undefined ? sync.claim(key, lockMs) : this.store.claim(key, lockMs);
  }

  /** `claimOrdered`, on a store whose `ordering` was checked. */
  claimOrdered(key: string, lockMs: number, ttlMs: number, order: EntityOrder): Promise<OrderedClaimResult> {
    return this.ordering!.claimOrdered(key, lockMs, ttlMs, order);
  }

  /** Completes or releases `held`; an ordered claim through the ordering operations (its entity's version and lock). */
  settle(stage: 'complete' | 'release', held: Held): boolean | Promise<boolean> {
    const order = held.order;
    if (order !== undefined) {
      return stage === 'complete' ? this.ordering!.completeOrdered(held.key, held.token, held.ttlMs, order) : this.ordering!.releaseOrdered(held.key, held.token, order);
    }
    const sync = this.#sync;
    if (sync !== undefined) return stage === 'complete' ? sync.complete(held.key, held.token, held.ttlMs) : sync.release(held.key, held.token);
    return stage === 'complete' ? this.store.complete(held.key, held.token, held.ttlMs) : this.store.release(held.key, held.token);
  }

  /** Completes `held` through the store's own methods, always a promise: a retry, off the request's path. */
  completeLater(held: Held): Promise<boolean> {
    const order = held.order;
    return order !== undefined ? this.ordering!.completeOrdered(held.key, held.token, held.ttlMs, order) : this.store.complete(held.key, held.token, held.ttlMs);
  }

  /** Renews `held` for `lockMs` (only called when the store {@link renews}, or with ordering). */
  extend(held: Held, lockMs: number): boolean | Promise<boolean> {
    const order = held.order;
    if (order !== undefined) return this.ordering!.extendOrdered(held.key, held.token, lockMs, order);
    const sync = this.#sync;
    return sync !== undefined ? sync.extend(held.key, held.token, lockMs) : this.store.extend!(held.key, held.token, lockMs);
  }
}

/** An acquired claim while its handler runs: what the heartbeat renews and `close` aborts. */
export class Held implements ClaimHandle {
  readonly context: HandlerContext;
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
  /** Its neighbours in its keeper's set of running claims (a {@link LinkedSet}). */
  prev: Held | undefined;
  next: Held | undefined;

  constructor(
    readonly store: IdempotencyStore,
    readonly key: string,
    readonly token: string,
    readonly ttlMs: number,
    readonly lockMs: number,
    readonly webhookId: string,
    /** The tenant whose keys verified it (tenant keys), for `onError`. */
    readonly tenant: string | undefined,
    time: number,
    /** Epoch ms past which the holder cannot run (the receiver's `claim` deadline): renewals never reach past it. */
    readonly deadline: number | undefined,
    /** Ordering: the delivery's entity and version, settled (and renewed) with the id. */
    readonly order?: EntityOrder,
    /** An inbox's job (the worker's claim): what its context says about the attempt. */
    job?: { attempt: number; maxAttempts: number; acceptedAt: number },
  ) {
    this.context = new HandlerContext(this, job);
    this.lockEnds = time + lockMs;
    this.renewAt = time + lockMs / 3;
  }
}

/** The delivery a failure concerns: its id and, with tenant keys, its tenant. */
export interface Subject {
  readonly webhookId: string;
  readonly tenant: string | undefined;
}

/** What the keeper was doing when the store failed: renewing a claim, or settling it. */
type KeeperStage = 'renew' | 'complete' | 'release';

/** How the keeper reports a store failure: the receiver's or the worker's `onError`, guarded. */
export type Report = (error: unknown, stage: KeeperStage, subject: Subject, willRetry: boolean) => void;

/** The acquired claims of one receiver or one worker: their renewal, settlement and completion retries. */
export class ClaimKeeper {
  /** The store's calls; `undefined` only for a receiver without idempotency, which holds no claims. */
  readonly #calls: StoreCalls | undefined;
  readonly #observer: Observer;
  readonly #now: () => number;
  readonly #lockMs: number;
  readonly #renews: boolean;
  readonly #report: Report;
  /**
   * Claims whose handler runs, for renewal (only with a store that has `extend`) and `close`.
   * Linked through the claims: a `Set` here got a new table from V8 each time a claim joined it
   * empty and each time its last claim left, which at one claim at a time is every delivery.
   */
  readonly #held = new LinkedSet<Held>();
  /** Completions still being retried, for `close`. */
  readonly #inFlight = new Set<Promise<void>>();
  #beat: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  constructor(options: { calls: StoreCalls | undefined; observer: Observer; now: () => number; lockMs: number; report: Report }) {
    this.#calls = options.calls;
    this.#observer = options.observer;
    this.#now = options.now;
    this.#lockMs = options.lockMs;
    this.#renews = options.calls?.renews ?? false;
    this.#report = options.report;
  }

  /** Stops renewing, aborts every running handler's signal, and returns the completions still being retried. */
  close(reason: Error): Promise<void>[] {
    this.#closed = true;
    if (this.#beat !== undefined) clearTimeout(this.#beat);
    this.#beat = undefined;
    for (const held of this.#held.clear()) {
      held.over = true;
      held.context.abort(reason);
    }
    return [...this.#inFlight];
  }

  // Renewal: one timer per receiver, not one per request, so a fast handler pays for its links in
  // the set of running claims and nothing else. It beats every sixth of the lock while any handler
  // runs and renews each claim a third of the lock after its last renewal, so a claim is renewed
  // before half its lock has gone by, and a renewal that failed (a store blip) is tried again at
  // the next beat, some four more times before the lock runs out.

  /** Renews `held` while its handler runs (only with a store that has `extend`). */
  hold(held: Held): void {
    if (!this.#renews) return;
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
    for (const held of this.#held.snapshot()) {
      if (held.over) {
        this.#held.delete(held);
      } else if (completingInStore(held)) {
        // Completed in the handler's own transaction (or committing it): the row is done, so
        // there is nothing to renew and nothing to lose while the handler finishes after it.
        continue;
      } else if (held.lockEnds <= time) {
        this.#lost(held, new Error(`the claim's lock ran out before it could be renewed (lockSeconds ${this.#lockMs / 1000})`));
      } else if (held.renewAt <= time && !held.renewing) {
        // #renew never rejects: a failure is reported and tried again at the next beat.
        void this.#renew(held, time);
      }
    }
    if (!this.#held.empty && !this.#closed) this.#arm();
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
      const calls = this.#calls!;
      const extend = () => calls.extend(held, lockMs);
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
      this.#report(error, 'renew', held, true);
    } finally {
      held.renewing = false;
    }
  }

  #lost(held: Held, error: Error): void {
    held.over = true;
    this.#held.delete(held);
    this.#report(error, 'renew', held, false);
    held.context.abort(error);
  }

  /** One attempt to complete or release; a failed completion goes on in the background. */
  settle(stage: 'complete' | 'release', held: Held): Promise<void> {
    held.over = true;
    this.#held.delete(held);
    const trace = held.trace;
    if (stage === 'complete' && isCompletedByStore(held)) {
      // Committed with the handler's side effect, in its transaction: nothing left to send.
      if (trace !== undefined) this.#observer.settled(trace, true);
      return DONE;
    }
    const calls = this.#calls!;
    let answer: boolean | Promise<boolean>;
    try {
      // A closure only when traced: untraced (the usual case), the store is called without one.
      answer = trace === undefined ? calls.settle(stage, held) : this.#observer.store(trace, stage, () => calls.settle(stage, held));
    } catch (error) {
      this.#settleFailed(error, stage, held);
      if (trace !== undefined) this.#observer.settled(trace, stage === 'complete');
      return DONE;
    }
    if (isPending(answer)) return this.#settleLater(answer, stage, held);
    // Answered at once (the memory store): nothing to wait for, and no promise made.
    this.#settledAs(answer, stage, held);
    // The outcome is the handler's, whatever the store did with it; the span covers the settlement.
    if (trace !== undefined) this.#observer.settled(trace, stage === 'complete');
    return DONE;
  }

  async #settleLater(answer: PromiseLike<boolean>, stage: 'complete' | 'release', held: Held): Promise<void> {
    try {
      this.#settledAs(await answer, stage, held);
    } catch (error) {
      this.#settleFailed(error, stage, held);
    } finally {
      if (held.trace !== undefined) this.#observer.settled(held.trace, stage === 'complete');
    }
  }

  /** What the store answered a settlement: `true` (done), `false` (the claim was no longer held), or outside the contract. */
  #settledAs(owned: unknown, stage: 'complete' | 'release', held: Held): void {
    if (typeof owned !== 'boolean') this.#report(badReply(stage, owned), stage, held, false);
    else if (!owned) this.#reportExpired(stage, held);
  }

  #settleFailed(error: unknown, stage: 'complete' | 'release', held: Held): void {
    // A failed release needs no retry: the lock expires by itself and the sender's retry runs.
    // A failed completion does: until it lands, the id looks in flight and, once the lock
    // expires, a duplicate would run the handler a second time.
    const retry = stage === 'complete' && this.#now() + COMPLETE_RETRY_FIRST_MS < held.lockEnds;
    this.#report(error, stage, held, retry);
    if (!retry) return;
    const pending = this.#retryCompletion(held);
    held.pending = pending;
    this.#inFlight.add(pending);
    // #retryCompletion never rejects (it reports its failures), so neither does this bookkeeping.
    void pending.finally(() => this.#inFlight.delete(pending));
  }

  async #retryCompletion(held: Held): Promise<void> {
    let delay = COMPLETE_RETRY_FIRST_MS;
    for (let attempts = 1; ; attempts++) {
      await sleep(delay);
      try {
        // Timed like the first attempt: retries during an outage belong in the store's latency.
        const calls = this.#calls!;
        const owned: unknown = await this.#observer.store(held.trace, 'complete', () => calls.completeLater(held));
        if (typeof owned !== 'boolean') this.#report(badReply('complete', owned), 'complete', held, false);
        // The store's contract makes a completion idempotent for its own token, so a first attempt
        // that timed out but landed late answers true here, not "taken over".
        else if (!owned) this.#reportExpired('complete', held);
        return;
      } catch (error) {
        delay = Math.min(delay * 2, COMPLETE_RETRY_MAX_MS);
        if (this.#closed || this.#now() + delay >= held.lockEnds) {
          this.#report(new Error(`gave up completing after ${attempts + 1} attempts: ${errorText(error)}`, { cause: error }), 'complete', held, false);
          return;
        }
      }
    }
  }

  #reportExpired(stage: 'complete' | 'release', held: Subject): void {
    const why = this.#renews
      ? 'its renewal failed for longer than the lock'
      : `the handler ran longer than lockSeconds, ${this.#lockMs / 1000} s, and the store cannot renew claims`;
    this.#report(new Error(`the claim expired before ${stage} (${why}) and may have been taken over`), stage, held, false);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    // Never keep a process alive just to retry (Node and Bun timers have unref; others return a number).
    (timer as { unref?: () => void }).unref?.();
  });
}
