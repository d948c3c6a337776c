/**
 * `webhook-receiver/testing`: sign requests for a destination's tests, assert what a relay
 * forwarded, and run a real receiver that records deliveries. Everything but
 * `createTestReceiver` is Web-standard and runs on edge runtimes too.
 */

export { signWebhook, generateSecret, generateKeyPair, type SignInput, type SignedWebhook } from '../src/sign.ts';
export type { SecretInput } from '../src/secrets.ts';
export type { VerifiedWebhook, WebhookInput } from '../src/verify.ts';
export {
  signedRequest,
  assertSignedWebhook,
  assertUnsignedWebhook,
  WebhookAssertionError,
  webhookMatchers,
  type RecordedRequest,
  type SignedRequestInit,
  type SignedWebhookAssertionOptions,
  type WebhookMatcherContext,
  type WebhookMatcherResult,
  checkEndpoint,
  assertEndpointConforms,
  formatCheckReport,
  EndpointCheckError,
  CHECK_CASES,
  type CheckCaseId,
  type CheckEndpointOptions,
  type CheckGroup,
  type CheckReport,
  type CheckRow,
  type CheckSent,
  type CheckVerdict,
  type FetchHandler,
  checkStore,
  StoreConformanceError,
  type CheckStoreContext,
  type CheckStoreOptions,
  type StoreConformanceReport,
  type StoreFactory,
  type StoreRule,
  type StoreRuleOutcome,
} from '../src/testing/index.ts';
export { createTestReceiver, type Delivery, type TestReceiver, type TestReceiverOptions } from './test-receiver.ts';
