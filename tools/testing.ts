/**
 * `webhook-receiver/testing`: sign requests for a destination's tests, assert what a relay
 * forwarded, and run a real receiver that records deliveries. Everything but
 * `createTestReceiver` is Web-standard and runs on edge runtimes too.
 *
 * @module webhook-receiver/testing
 */

export * from '../src/testing/index.ts';
export { signWebhook, generateSecret, generateKeyPair, type SignInput, type SignedWebhook } from '../src/sign.ts';
export type { SecretInput } from '../src/secrets.ts';
export type { VerifiedWebhook, WebhookInput } from '../src/verify.ts';
export { createTestReceiver, type Delivery, type TestReceiver, type TestReceiverOptions } from './test-receiver.ts';
