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
