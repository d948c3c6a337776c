/**
 * Helpers for the receiver tests: signed deliveries (a retry is a new signature over the same
 * id), a store wrapper that records each call, and an `onError` that collects reports.
 */

import { signWebhook, generateSecret } from '../../src/sign.ts';
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

/** A store that forwards to `inner` and records every call: proof of which requests touched it. */
export function recording(inner: IdempotencyStore): IdempotencyStore & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    claim: (key, lockMs) => (calls.push(`claim ${key}`), inner.claim(key, lockMs)),
    complete: (key, token, ttlMs) => (calls.push(`complete ${key}`), inner.complete(key, token, ttlMs)),
    release: (key, token) => (calls.push(`release ${key}`), inner.release(key, token)),
  };
}

/** An `onError` that collects what it is told. */
export function errorLog(): {
  onError: (error: unknown, context: { stage: string; webhookId: string; willRetry: boolean }) => void;
  entries: { stage: string; webhookId: string; willRetry: boolean; error: unknown }[];
} {
  const entries: { stage: string; webhookId: string; willRetry: boolean; error: unknown }[] = [];
  return { entries, onError: (error, context) => entries.push({ ...context, error }) };
}
