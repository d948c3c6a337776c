/**
 * The relay's documents as its API document gives them, from a destination's side. Fields the
 * document marks optional or leaves open are optional here; fields the relay adds later are kept
 * (the documents are passed through as parsed, only checked where the client relies on them).
 */

/**
 * How the relay judged an event's inbound signature at capture: `verified` (a payload signature
 * checked out), `authenticated` (a shared token or HTTP Basic checked out: weaker, reported
 * apart), `failed` (checked and rejected: never forwarded), `unattempted` (nothing was checked:
 * forwarded unsigned).
 *
 * @example
 * ```ts
 * import type { VerificationState } from 'webhook-receiver/relay';
 * const vouched = (state: VerificationState) => state === 'verified' || state === 'authenticated';
 * ```
 */
export type VerificationState = 'verified' | 'authenticated' | 'failed' | 'unattempted';

/**
 * How an event's `dedupKey` was derived; the first that applies wins, in this order.
 *
 * @example
 * ```ts
 * import type { DedupStrategy } from 'webhook-receiver/relay';
 * const sendersOwnId = (strategy: DedupStrategy) => strategy === 'sw_webhook_id' || strategy === 'provider_event_id';
 * ```
 */
export type DedupStrategy = 'sw_webhook_id' | 'provider_event_id' | 'content_hash' | 'fields' | 'unique';

/**
 * The statuses of an outbound delivery. The relay does not publish their transitions.
 *
 * @example
 * ```ts
 * import type { DeliveryStatus } from 'webhook-receiver/relay';
 * const gaveUp: DeliveryStatus[] = ['dead', 'failed'];
 * ```
 */
export type DeliveryStatus = 'queued' | 'forwarded' | 'pending' | 'delivered' | 'failed' | 'blocked' | 'dead' | 'cancelled';

/** Every {@link DeliveryStatus}, in the API document's order. */
export const DELIVERY_STATUSES: readonly DeliveryStatus[] = ['queued', 'forwarded', 'pending', 'delivered', 'failed', 'blocked', 'dead', 'cancelled'];

/**
 * Who the API key is (`GET /v1/whoami`): its organisation and scopes. Other fields the relay
 * sends are kept.
 *
 * @example
 * ```ts
 * import { relayClient, type RelayIdentity } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * const me: RelayIdentity = await relay.whoami();
 * console.log(me.orgId, me.scopes.join(' '));
 * ```
 */
export interface RelayIdentity {
  orgId: string;
  scopes: string[];
  [field: string]: unknown;
}

/**
 * A captured event, in full (`GET /v1/events/{eventId}`). The raw body is not in it: see
 * `payload()`. `headers` are the captured request's headers, unscrubbed, in arrival order, repeats
 * kept: they hold whatever credentials the sender sent.
 *
 * @example
 * ```ts
 * import { relayClient, type RelayEvent } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * const event: RelayEvent = await relay.event('0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80');
 * console.log(event.verificationState, event.payloadBytes, event.headers.length);
 * ```
 */
export interface RelayEvent {
  id: string;
  orgId: string;
  endpointId: string;
  /** When capture completed (RFC 3339); the order of an endpoint's events. */
  receivedAt: string;
  provider: string | null;
  /** The captured request's method; `null` means unrecorded (never read it as `POST`). */
  method: string | null;
  contentType: string | null;
  payloadBytes: number;
  payloadObjectKey?: string;
  headers: [string, string][];
  verified: boolean;
  verificationState: VerificationState;
  verification?: { ok: boolean; keyId?: string; scheme?: string; authenticity?: string } | null;
  providerEventId?: string | null;
  externalId?: string;
  dedupKey: string;
  dedupStrategy: DedupStrategy;
  [field: string]: unknown;
}

/**
 * An event's raw body, decoded: the exact captured bytes (checked against the length the relay
 * declares) and their content type.
 *
 * @example
 * ```ts
 * import { relayClient, type RelayPayload } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * const payload: RelayPayload = await relay.payload('0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80');
 * console.log(payload.contentType, payload.body.byteLength);
 * ```
 */
export interface RelayPayload {
  contentType: string | null;
  body: Uint8Array;
}

/**
 * One outbound delivery attempt (`GET /v1/deliveries`).
 *
 * @example
 * ```ts
 * import { relayClient, type RelayDelivery } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * for await (const delivery of relay.deliveries({ statuses: ['dead'] })) {
 *   const d: RelayDelivery = delivery;
 *   console.log(d.eventId, d.status, d.attempt, d.statusCode, d.error);
 * }
 * ```
 */
export interface RelayDelivery {
  id: string;
  eventId: string;
  destinationId: string;
  subscriptionId?: string | null;
  status: DeliveryStatus;
  statusCode?: number | null;
  attempt?: number | null;
  error?: string | null;
  nextRetryAt?: string | null;
  createdAt?: string;
  sourceVerificationState?: VerificationState;
  [field: string]: unknown;
}

/**
 * A replay destination: a URL the relay delivers to, with a signing secret of its own.
 *
 * @example
 * ```ts
 * import { relayClient, type RelayDestination } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * const mine: RelayDestination | undefined = (await relay.replayDestinations()).find((d) => d.url === 'https://app.example.com/webhooks');
 * ```
 */
export interface RelayDestination {
  id: string;
  orgId?: string;
  url: string;
  label?: string;
  status?: string;
  createdAt?: string;
  lastValidatedAt?: string | null;
  ordered?: boolean;
  disabledAt?: string | null;
  [field: string]: unknown;
}

/**
 * A destination's new signing secret, as the rotation returns it: the only time the relay shows
 * it. Store it before anything else.
 *
 * @example
 * ```ts
 * import { relayClient, type RelaySigningSecret } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * const rotated: RelaySigningSecret = await relay.rotateSigningSecret('0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80');
 * await secrets.put(rotated.keyId, rotated.signingSecret);
 * ```
 */
export interface RelaySigningSecret {
  destinationId: string;
  keyId: string;
  signingSecret: string;
}

/**
 * An event as a trigger's wait hands it out: ids, capture facts and, when inline bodies were
 * asked for, a bounded body (`bodyTruncated` when it was cut at the cap). No headers.
 *
 * @example
 * ```ts
 * import type { TriggerEvent } from 'webhook-receiver/relay';
 * const usable = (event: TriggerEvent) => event.body !== undefined && event.bodyEncoding === 'utf8' && event.bodyTruncated !== true;
 * ```
 */
export interface TriggerEvent {
  id: string;
  orgId: string;
  endpointId: string;
  receivedAt: string;
  provider: string | null;
  dedupKey: string;
  dedupStrategy: DedupStrategy;
  verified: boolean;
  vouched?: boolean;
  verificationState: VerificationState;
  body?: string;
  bodyEncoding?: string;
  bodyTruncated?: boolean;
  contentType?: string | null;
  [field: string]: unknown;
}

/**
 * One answer of a trigger's wait: the events, the cursor to resume from (`null` when the relay
 * gave none), and whether the trigger has caught up with its endpoint's events.
 *
 * @example
 * ```ts
 * import { relayClient, type TriggerBatch } from 'webhook-receiver/relay';
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY! });
 * const batch: TriggerBatch = await relay.waitTrigger('0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80', { limit: 50 });
 * console.log(batch.events.length, batch.caughtUp, batch.nextCursor);
 * ```
 */
export interface TriggerBatch {
  events: TriggerEvent[];
  nextCursor: string | null;
  caughtUp: boolean;
}
