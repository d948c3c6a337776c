/**
 * `webhook-receiver`: the verifier, the receiver (verification and idempotency), the memory store,
 * the signer, the typed router and the error table. Web APIs only: it runs on Node, Bun, Deno,
 * Cloudflare Workers and Vercel Edge.
 *
 * @module webhook-receiver
 */

export { WebhookError, PermanentError, WEBHOOK_ERROR_STATUS, isWebhookError, type WebhookErrorCode, type WebhookErrorOptions } from './errors.ts';
export type { HeadersInput } from './headers.ts';
export type { SecretInput } from './secrets.ts';
export {
  createVerifier,
  verifyWebhook,
  DEFAULT_TOLERANCE_SECONDS,
  MAX_ID_LENGTH,
  MAX_SIGNATURE_ENTRIES,
  MAX_SIGNATURE_HEADER_LENGTH,
  MAX_V1A_ENTRIES,
  type Verifier,
  type VerifierOptions,
  type VerifiedWebhook,
  type WebhookInput,
} from './verify.ts';
export { DEFAULT_MAX_BODY_BYTES } from './body.ts';
export {
  tenantKeys,
  TENANT_KEYS_DEFAULTS,
  type TenantKeys,
  type TenantKeysLoaded,
  type TenantKeysOptions,
  type TenantKeysUsage,
  type TenantRequest,
} from './keys.ts';
export {
  createSigner,
  signWebhook,
  generateSecret,
  generateKeyPair,
  type SignInput,
  type SignedWebhook,
  type Signer,
  type SignerInput,
} from './sign.ts';
export {
  createReceiver,
  DEFAULT_LOCK_SECONDS,
  DEFAULT_RENEWED_LOCK_SECONDS,
  DEFAULT_TTL_SECONDS,
  DEFAULT_UNSIGNED_TTL_SECONDS,
  type Claim,
  type ClaimOptions,
  type CloseOptions,
  type EnqueueOptions,
  type HandleOptions,
  type InboxIntake,
  type WebhookContext,
  type IdempotencyOptions,
  type AcceptResult,
  type ReceiveResult,
  type Receiver,
  type ReceiverErrorContext,
  type ReceiverOptions,
} from './receiver.ts';
export { INBOX_JOB_FORMAT, type InboxJob } from './job-format.ts';
export type {
  DeadLetter,
  Inbox,
  InboxHandler,
  InboxWorker,
  JobContext,
  JobOutcomeEvent,
  JobSelector,
  WorkerErrorContext,
  WorkOptions,
} from './inbox/types.ts';
export { encodeVersion, MAX_ENTITY_LENGTH, type OrderingEvent, type OrderingOptions, type OrderingVersion } from './ordering.ts';
export {
  DEFAULT_UNSIGNED_MAX,
  StoreError,
  type ClaimHandle,
  type ClaimResult,
  type EntityOrder,
  type IdempotencyStore,
  type OrderedClaimResult,
  type OrderingOperations,
  type StoreErrorReason,
} from './stores/types.ts';
export {
  memoryStore,
  DEFAULT_MEMORY_STORE_MAX,
  DEFAULT_MEMORY_STORE_UNSIGNED_MAX,
  type MemoryStore,
  type MemoryStoreOptions,
  type MemoryStoreUsage,
} from './stores/memory/index.ts';
export {
  acceptResponse,
  claimResponse,
  errorResponse,
  settleClaim,
  STORE_UNAVAILABLE_RETRY_AFTER_SECONDS,
  type AdapterOptions,
  type RejectionContext,
  type WebhookResponse,
} from './http.ts';
export { createRouter, type EventHandler, type RouteResult, type RouterOptions, type UnhandledEvents, type WebhookEvent, type WebhookRouter } from './router.ts';
export type { PayloadIssues, StandardSchemaV1 } from './schema.ts';
export { TELEMETRY_NAMES, type DeliveryOutcome, type OpenTelemetryApi, type OutcomeEvent, type TelemetryOptions } from './telemetry.ts';
export type { JobFailureLogFields, RejectionLogFields, WebhookLogger } from './logger.ts';
