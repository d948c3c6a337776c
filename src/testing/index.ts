/**
 * The runtime-agnostic part of `webhook-receiver/testing`: Web types only, so these helpers run
 * wherever the core runs (Node, Bun, Deno, Workers).
 */

export { signedRequest, type SignedRequestInit } from './request.ts';
export { assertSignedWebhook, assertUnsignedWebhook, WebhookAssertionError, type SignedWebhookAssertionOptions } from './assert.ts';
export type { RecordedRequest } from './recorded.ts';
export {
  parseCapturedDelivery,
  parseRelayEvent,
  signReplay,
  replayRequest,
  REPLAY_DROPPED_HEADERS,
  type CapturedDelivery,
  type CapturedVerification,
  type RelayEventDocument,
  type RelayPayloadDocument,
  type ReplayOptions,
  type ReplaySource,
  type SignedReplay,
} from './replay.ts';
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
  type CheckVerdict,
  type FetchHandler,
} from './check.ts';
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
