/**
 * `triggerSource`: events pulled from the relay through a trigger (`GET /v1/triggers/{id}/wait`),
 * fed into a receiver as if they had been pushed: its claims, ordering, inbox and telemetry. Each
 * event is rebuilt as the `Webhook` a pushed delivery is, and enters the receiver at the claim: no
 * signature covers a pulled event (the API key over TLS authenticated it), so there is nothing to
 * verify and no replay window. The cursor is saved only once a whole batch was processed or
 * durably accepted, so a crash replays at most that batch, and the claims answer its events as
 * duplicates.
 */

import { errorText, isWebhookError, PermanentError } from '../errors.ts';
import { utf8Encoder } from '../lib/encoding.ts';
import { isWholeNumber } from '../lib/checks.ts';
import { pulledEntryOf } from '../receiver/entries.ts';
import { rebuiltWebhook, type VerifiedWebhook } from '../verify.ts';
import { RelayError } from './errors.ts';
import { isRelayId, relayId } from './ids.ts';
import { RetryLater, Stopped, triggerLoop } from './trigger-loop.ts';
import type { PulledEventReport, TriggerErrorContext, TriggerSource, TriggerSourceOptions } from './trigger-types.ts';
import type { DedupStrategy, TriggerEvent } from './types.ts';

const DEFAULT_DEDUP_BY: readonly DedupStrategy[] = ['sw_webhook_id', 'provider_event_id'];
const STRATEGIES: readonly DedupStrategy[] = ['sw_webhook_id', 'provider_event_id', 'content_hash', 'fields', 'unique'];
const STATES = new Set(['verified', 'authenticated', 'unattempted', 'failed']);

function defaultOnError(error: unknown, context: TriggerErrorContext): void {
  const where = context.eventId === undefined ? context.stage : `${context.stage} of event ${context.eventId}`;
  const next = context.retryInMs === undefined ? '' : `; polling again in ${context.retryInMs} ms`;
  console.warn(`webhook-receiver triggerSource: ${where} failed: ${errorText(error)}${next}`);
}

function badEvent(message: string): RelayError {
  return new RelayError({ status: 200, code: 'BAD_RESPONSE', operation: 'GET /v1/triggers/{triggerId}/wait', message });
}

/**
 * Pulls a trigger's events into a receiver's pipeline. Claims are keyed by the event's `id`, or by
 * its `dedupKey` for the strategies in `dedupBy`. Each event becomes the `Webhook` a pushed
 * delivery is (`timestamp` from `receivedAt` in whole seconds, the exact body bytes, `json()`),
 * with `scheme: 'relay'`, `verificationState` and `relayEventId`: `verified` and `authenticated`
 * events are signed (the relay vouches for them), `unattempted` ones unsigned (refused unless the
 * receiver has `unsigned: 'accept'`, and in its unsigned budget), `failed` ones never processed. An
 * inline body is used only when it is `utf8` and not truncated; otherwise `payload()` fetches it
 * whole before anything runs.
 *
 * @example
 * ```ts
 * import { createReceiver } from 'webhook-receiver';
 * import { fileCursor, relayClient, triggerSource } from 'webhook-receiver/relay';
 *
 * const source = triggerSource({
 *   relay: relayClient({ baseUrl: process.env.RELAY_URL!, apiKey: process.env.RELAY_API_KEY! }),
 *   triggerId: process.env.RELAY_TRIGGER_ID!,
 *   cursor: fileCursor('.relay-cursor'),
 *   receiver: createReceiver({ secrets: process.env.WEBHOOK_SECRET! }),
 *   handler: async (webhook) => console.log(webhook.id, webhook.verificationState, webhook.json()),
 * });
 * process.on('SIGTERM', () => void source.close());
 * await source.run();
 * ```
 */
export function triggerSource(options: TriggerSourceOptions): TriggerSource {
  if (typeof options !== 'object' || options === null) throw new TypeError('triggerSource needs options: { relay, triggerId, cursor, receiver }');
  const { relay, cursor, handler, limit, maxInlineBytes, tenant } = options;
  if (typeof relay !== 'object' || relay === null || typeof relay.waitTrigger !== 'function' || typeof relay.payload !== 'function') throw new TypeError('triggerSource: relay must be a client from relayClient()');
  const triggerId = relayId(options.triggerId, 'triggerSource: triggerId');
  if (typeof cursor !== 'object' || cursor === null || typeof cursor.load !== 'function' || typeof cursor.save !== 'function') throw new TypeError('triggerSource: cursor must be { load(), save(cursor) }: fileCursor(path), keyValueCursor({ kv, key }) or your own');
  const entry = options.receiver === undefined ? undefined : pulledEntryOf(options.receiver);
  if (entry === undefined) throw new TypeError('triggerSource: receiver must be a receiver from createReceiver()');
  if (entry.hasInbox && handler !== undefined) throw new TypeError("triggerSource: the receiver has an inbox, so pulled events are accepted into it and the inbox's workers run the handler: pass no handler");
  if (!entry.hasInbox && typeof handler !== 'function') throw new TypeError('triggerSource: pass a handler, or a receiver with an inbox');
  if (tenant !== undefined && (typeof tenant !== 'string' || tenant === '')) throw new TypeError('triggerSource: tenant must be a non-empty string');
  const dedupBy = new Set(options.dedupBy ?? DEFAULT_DEDUP_BY);
  for (const strategy of dedupBy) if (!STRATEGIES.includes(strategy)) throw new TypeError(`triggerSource: dedupBy holds ${JSON.stringify(strategy)}, not a dedupStrategy (${STRATEGIES.join(', ')})`);
  for (const name of ['onEvent', 'onError', 'sleep', 'random'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') throw new TypeError(`triggerSource: ${name} must be a function`);
  }
  // Checked now rather than on the first wait, which would only report them to onError.
  if (limit !== undefined && !isWholeNumber(limit, 1, 200)) throw new RangeError(`triggerSource: limit must be a whole number from 1 to 200; got ${String(limit)}`);
  if (maxInlineBytes !== undefined && !isWholeNumber(maxInlineBytes, 1, 65_536)) throw new RangeError(`triggerSource: maxInlineBytes must be a whole number from 1 to 65536; got ${String(maxInlineBytes)}`);
  const onEvent = options.onEvent;
  const onError = options.onError ?? defaultOnError;
  // With an inbox the event is accepted into it; without one, the handler runs it.
  const run = entry.hasInbox ? (webhook: VerifiedWebhook, contentType: string | null) => entry.accept(webhook, contentType) : (webhook: VerifiedWebhook) => entry.handle(webhook, handler!);

  function report(error: unknown, context: TriggerErrorContext): void {
    try {
      onError(error, context);
    } catch {
      // A throwing logger must not stop the pull.
    }
  }

  function tell(outcome: PulledEventReport): void {
    try {
      onEvent?.(outcome);
    } catch {
      // Nor a throwing listener.
    }
  }

  /** The event's body: inline when usable, else the whole of it from the relay. */
  async function bodyOf(event: TriggerEvent, signal: AbortSignal): Promise<{ body: Uint8Array; contentType: string | null }> {
    const inlineType = typeof event.contentType === 'string' ? event.contentType : null;
    if (typeof event.body === 'string' && event.bodyEncoding === 'utf8' && event.bodyTruncated !== true) return { body: utf8Encoder.encode(event.body), contentType: inlineType };
    try {
      const payload = await relay.payload(event.id, { signal });
      return { body: payload.body, contentType: payload.contentType ?? inlineType };
    } catch (error) {
      throw new Stopped(error, { stage: 'payload', eventId: event.id });
    }
  }

  async function processEvent(event: TriggerEvent, signal: AbortSignal): Promise<void> {
    if (typeof event !== 'object' || event === null || !isRelayId(event.id)) throw new Stopped(badEvent('an event has no id the relay gives (a UUID)'), { stage: 'wait' });
    const state = event.verificationState;
    if (!STATES.has(state)) throw new Stopped(badEvent(`event ${event.id} has the verificationState ${JSON.stringify(state)}, which the API document does not list`), { stage: 'wait', eventId: event.id });
    const useKey = dedupBy.has(event.dedupStrategy) && typeof event.dedupKey === 'string' && event.dedupKey !== '';
    const webhookId = useKey ? event.dedupKey : event.id;
    if (state === 'failed') {
      // The relay never forwards these either: a capture whose signature did not check out.
      tell({ eventId: event.id, webhookId, outcome: 'skipped', verificationState: state, reason: "the relay's verification of its signature failed at capture" });
      return;
    }
    const receivedAt = Date.parse(event.receivedAt);
    if (Number.isNaN(receivedAt)) throw new Stopped(badEvent(`event ${event.id} has no receivedAt time`), { stage: 'wait', eventId: event.id });
    const { body, contentType } = await bodyOf(event, signal);
    const webhook = rebuiltWebhook({
      id: webhookId,
      // Whole seconds, as webhook-timestamp is: a handler sees the same whether pushed or pulled.
      timestamp: new Date(Math.floor(receivedAt / 1000) * 1000),
      body,
      signed: state !== 'unattempted',
      scheme: 'relay',
      keyIndex: undefined,
      keyId: undefined,
      tenant,
      verificationState: state,
      relayEventId: event.id,
    });
    let result;
    try {
      result = await run(webhook, contentType);
    } catch (error) {
      if (error instanceof PermanentError || (isWebhookError(error) && error.status < 500)) {
        tell({ eventId: event.id, webhookId, outcome: 'skipped', verificationState: state, reason: isWebhookError(error) ? `${error.code}: ${error.message}` : errorText(error) });
        report(error, { stage: 'event', eventId: event.id });
        return;
      }
      throw error;
    }
    if (result.outcome === 'in_progress') {
      // Held by another puller or a pushed delivery still running: not done, so not passed.
      throw new RetryLater(`event ${webhookId} is being processed elsewhere (its claim is held); pulling it again in ${result.retryAfterSeconds} s`, Math.max(1, result.retryAfterSeconds) * 1000);
    }
    tell({ eventId: event.id, webhookId, outcome: result.outcome, verificationState: state });
  }

  return triggerLoop({
    relay,
    triggerId,
    cursor,
    wait: { ...(limit === undefined ? {} : { limit }), ...(maxInlineBytes === undefined ? {} : { maxInlineBytes }) },
    idle: options.idle,
    errors: options.errors,
    sleep: options.sleep,
    random: options.random,
    each: processEvent,
    report,
  });
}
