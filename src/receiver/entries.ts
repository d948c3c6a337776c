/**
 * What a receiver built by `createReceiver` hands to the package's other parts without making it
 * public: its observer (the adapters' shared flow reports the rejections it makes itself through
 * it) and its way in for events pulled from the relay (`triggerSource`). Internal.
 */

import type { AcceptResult, ReceiveResult, Receiver, WebhookContext } from './types.ts';
import type { Observer } from '../telemetry.ts';
import type { VerifiedWebhook } from '../verify.ts';

/** Each receiver's observer, for the adapters' shared flow (`observerOf`). */
export const observers = new WeakMap<Receiver, Observer>();

/**
 * The observer of a receiver built by {@link createReceiver}: the adapters' shared flow reports
 * the rejections it makes itself through it. Internal.
 */
export function observerOf(receiver: Receiver): Observer | undefined {
  return observers.get(receiver);
}

/**
 * The way into a receiver for events pulled from the relay's API (`triggerSource`): they were
 * authenticated by the API key, not by a signature, so they skip verification and enter at the
 * claim, the same claims, ordering, inbox and telemetry as a delivery received over HTTP. Internal.
 */
export interface PulledEntry {
  /** True when the receiver has an inbox: pulled events are accepted into it, not handled. */
  readonly hasInbox: boolean;
  handle(webhook: VerifiedWebhook, handler: (webhook: VerifiedWebhook, context: WebhookContext) => unknown): Promise<ReceiveResult<unknown>>;
  accept(webhook: VerifiedWebhook, contentType: string | null): Promise<AcceptResult>;
}

export const pulledEntries = new WeakMap<Receiver, PulledEntry>();

/** The pulled-event entry of a receiver built by {@link createReceiver}. Internal. */
export function pulledEntryOf(receiver: Receiver): PulledEntry | undefined {
  return pulledEntries.get(receiver);
}

