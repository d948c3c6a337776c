/**
 * Helpers for the receiver tests: signed deliveries (a retry is a new signature over the same
 * id), a store wrapper that records each call, and an `onError` that collects reports.
 */

import { signWebhook, generateSecret } from '../../src/sign.ts';
import { offerSyncOperations, syncOperations } from '../../src/stores/internal.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import type { WebhookInput } from '../../src/verify.ts';

export const SECRET = generateSecret();

/** One delivery of `id`, freshly signed: every call is what a sender's retry looks like. */
export async function delivery(id: string, body = '{"type":"invoice.paid"}'): Promise<WebhookInput> {
  const signed = await signWebhook({ secret: SECRET, body, id });
  return { headers: signed.headers, body };
}

/** The same, as a Fetch `Request`. */
export async function deliveryRequest(id: string, body = '{"type":"invoice.paid"}'): Promise<Request> {
  const signed = await signWebhook({ secret: SECRET, body, id });
  return new Request('http://127.0.0.1/webhooks', { method: 'POST', headers: signed.headers, body });
}

/**
 * A store that forwards to `inner` and records every call: proof of which requests touched it.
 * With `direct`, it also offers `inner`'s synchronous operations (recorded the same way), so the
 * receiver takes the path it takes with a bare memory store.
 */
export function recording(inner: IdempotencyStore, { direct = false } = {}): IdempotencyStore & { calls: string[] } {
  const calls: string[] = [];
  const store = {
    calls,
    claim: (key: string, lockMs: number) => (calls.push(`claim ${key}`), inner.claim(key, lockMs)),
    complete: (key: string, token: string, ttlMs: number) => (calls.push(`complete ${key}`), inner.complete(key, token, ttlMs)),
    release: (key: string, token: string) => (calls.push(`release ${key}`), inner.release(key, token)),
  };
  if (direct) {
    const sync = syncOperations(inner);
    if (sync === undefined) throw new Error('direct: the inner store has no synchronous operations');
    offerSyncOperations(store, {
      claim: (key, lockMs) => (calls.push(`claim ${key}`), sync.claim(key, lockMs)),
      complete: (key, token, ttlMs) => (calls.push(`complete ${key}`), sync.complete(key, token, ttlMs)),
      release: (key, token) => (calls.push(`release ${key}`), sync.release(key, token)),
      extend: (key, token, lockMs) => sync.extend(key, token, lockMs),
    });
  }
  return store;
}

/** An `onError` that collects what it is told. */
export function errorLog(): {
  onError: (error: unknown, context: { stage: string; webhookId: string; willRetry: boolean }) => void;
  entries: { stage: string; webhookId: string; willRetry: boolean; error: unknown }[];
} {
  const entries: { stage: string; webhookId: string; willRetry: boolean; error: unknown }[] = [];
  return { entries, onError: (error, context) => entries.push({ ...context, error }) };
}
