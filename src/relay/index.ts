/**
 * `webhook-receiver/relay`: a client of the relay's own API, for what a destination does besides
 * receiving: fetch an event and its raw body, list the deliveries the relay gave up on, rotate the
 * destination's signing secret, and pull events through a trigger. Web-standard (`fetch`): it runs
 * wherever the core runs.
 *
 * @module webhook-receiver/relay
 */

export { relayClient, type RelayClient, type RelayClientOptions, type DeliveriesFilter, type WaitTriggerOptions, type RelayCallOptions } from './client.ts';
export { RelayError, type RelayErrorInit, type RelayClientErrorCode } from './errors.ts';
export { isRelayId } from './ids.ts';
export type { QueryRole, RelayQueryNames } from './openapi.ts';
export type { RelayFetch } from './transport.ts';
export {
  DELIVERY_STATUSES,
  type DedupStrategy,
  type DeliveryStatus,
  type RelayDelivery,
  type RelayDestination,
  type RelayEvent,
  type RelayIdentity,
  type RelayPayload,
  type RelaySigningSecret,
  type TriggerBatch,
  type TriggerEvent,
  type VerificationState,
} from './types.ts';
export { triggerSource } from './trigger-source.ts';
export type { TriggerSource, TriggerSourceOptions, PollResult, PulledEventReport, TriggerErrorContext } from './trigger-types.ts';
export { keyValueCursor, type CursorStore, type CursorKeyValue } from './cursor.ts';
export { fileCursor } from './file-cursor.ts';
export type { PullBackoffOptions } from './pull-backoff.ts';
