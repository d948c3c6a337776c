/**
 * The handler's context: the signal a running handler is told to stop with (the claim was lost,
 * the receiver closed), made on first use since most handlers never look at it, and the claim.
 */

import type { ClaimHandle } from '../stores/types.ts';
import type { WebhookContext } from './types.ts';

/**
 * A handler's context. With a claim, the claim protocol aborts its signal when the claim is lost;
 * without one (no deduplication), only the receiver's close does.
 */
export class Context implements WebhookContext {
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
