/**
 * The handler's context, the same in every mode: the synchronous receiver, every adapter, and an
 * inbox's worker. Below both the receiver and the inbox, so each can name it without the other:
 * its public shape, and the one object that implements it (the signal a running handler is told
 * to stop with, made on first use since most handlers never look at it, and the claim).
 */

import type { ClaimHandle } from './stores/types.ts';

/**
 * What a handler gets besides the webhook, the same object in every adapter.
 *
 * - `signal` aborts when the handler should stop: its claim was lost (renewal failed past the
 *   lock, or another delivery took the id over) or the receiver was closed. A client that leaves
 *   does not abort it: a handler that still succeeds completes its claim.
 * - `claim` identifies the claim for stores that settle it inside the handler's own transaction
 *   (`store.transaction(context, fn)` of the Postgres store); `undefined` without deduplication.
 * - `attempt`, `maxAttempts`, `acceptedAt`: which attempt this is, of how many, and when the
 *   delivery was accepted. In an inbox's worker they are the job's; in the synchronous mode
 *   `attempt` and `maxAttempts` are 1 (the sender's retries are its own) and `acceptedAt` is when
 *   the request was claimed, so a handler moves between the modes unchanged.
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
  /** 1 on the first attempt. */
  readonly attempt: number;
  /** Past it (or on a `PermanentError`) an inbox's job is dead-lettered; 1 in the synchronous mode. */
  readonly maxAttempts: number;
  /** When the delivery was accepted. */
  readonly acceptedAt: Date;
}

/**
 * A handler's context. With a claim, the claim protocol aborts its signal when the claim is lost;
 * without one (no deduplication), only the receiver's close does.
 */
export class HandlerContext implements WebhookContext {
  #controller: AbortController | undefined;
  #reason: unknown;
  #aborted = false;
  readonly attempt: number;
  readonly maxAttempts: number;
  /** Epoch ms; the `Date` is made on first use. */
  readonly #acceptedAt: number;
  constructor(
    readonly claim: ClaimHandle | undefined,
    /** An inbox's job: its attempt, of how many, and when it was accepted. Default: the synchronous mode's 1, 1, now. */
    job?: { attempt: number; maxAttempts: number; acceptedAt: number },
  ) {
    this.attempt = job?.attempt ?? 1;
    this.maxAttempts = job?.maxAttempts ?? 1;
    this.#acceptedAt = job?.acceptedAt ?? Date.now();
  }
  get acceptedAt(): Date {
    return new Date(this.#acceptedAt);
  }
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
