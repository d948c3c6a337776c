/**
 * `webhook-receiver/testing`: sign requests for a destination's tests, assert what a relay
 * forwarded, check a live endpoint or a store against the standard, and run a real receiver that
 * records deliveries. Everything but `createTestReceiver` (in `./node/`, which loads `node:http`
 * only when it is called) is Web-standard and runs wherever the core runs (Node, Bun, Deno,
 * Workers).
 *
 * @module webhook-receiver/testing
 */

export { signedRequest, type SignedRequestInit } from './request.ts';
export {
  signedLambdaEvent,
  type HttpApiLambdaEvent,
  type LambdaEventSource,
  type RestApiLambdaEvent,
  type SignedLambdaEventInit,
} from './lambda-event.ts';
export { assertSignedWebhook, assertUnsignedWebhook, WebhookAssertionError, type SignedWebhookAssertionOptions } from './assert.ts';
export type { RecordedRequest } from './recorded.ts';
export {
  parseCapturedDelivery,
  parseRelayEvent,
  signReplay,
  replayRequest,
  REPLAY_DROPPED_HEADERS,
  type CaptureRejection,
  type CapturedDelivery,
  type CapturedVerification,
  type RelayEventDocument,
  type RelayPayloadDocument,
  type ReplayOptions,
  type ReplaySource,
  type SignedReplay,
} from './signed-replay.ts';
export { isCredentialHeader, redactCredentialHeaders, REDACTED } from './redact.ts';
export { webhookMatchers, type WebhookMatcherContext, type WebhookMatcherResult } from './matchers.ts';
export {
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
  type CheckTenant,
  type CheckVerdict,
  type FetchHandler,
} from './check-endpoint.ts';
export {
  checkStore,
  StoreConformanceError,
  type CheckStoreContext,
  type CheckStoreOptions,
  type StoreConformanceReport,
  type StoreFactory,
  type StoreRule,
  type StoreRuleOutcome,
} from './check-store.ts';
export { signWebhook, generateSecret, generateKeyPair, type SignInput, type SignedWebhook } from '../sign.ts';
export type { SecretInput } from '../secrets.ts';
export type { VerifiedWebhook, WebhookInput } from '../verify.ts';
export { createTestReceiver, type Delivery, type TestReceiver, type TestReceiverOptions } from './node/test-receiver.ts';
export {
  relayEmulator,
  RELAY_EMULATOR_SCOPES,
  type EmulatedEventInit,
  type EmulatedFailure,
  type EmulatedRequest,
  type RelayEmulator,
  type RelayEmulatorOptions,
} from './node/relay-emulator.ts';
export type { RelayEmulatorQueryNames } from './node/relay-openapi.ts';
