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
import { utf8Encoder } from '../encoding.ts';
import { pulledEntryOf, type PulledEntry } from '../receiver/entries.ts';
import { rebuiltWebhook } from '../verify.ts';
import { RelayError } from './errors.ts';
import { isRelayId, relayId } from './ids.ts';
import { pullBackoff, type PullBackoff } from './pull-backoff.ts';
import type { PollResult, PulledEventReport, TriggerErrorContext, TriggerSource, TriggerSourceOptions } from './trigger-types.ts';
import type { DedupStrategy, TriggerEvent } from './types.ts';

const DEFAULT_DEDUP_BY: readonly DedupStrategy[] = ['sw_webhook_id', 'provider_event_id'];
const STRATEGIES: readonly DedupStrategy[] = ['sw_webhook_id', 'provider_event_id', 'content_hash', 'fields', 'unique'];
const STATES = new Set(['verified', 'authenticated', 'unattempted', 'failed']);

function defaultSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function defaultOnError(error: unknown, context: TriggerErrorContext): void {
  const where = context.eventId === undefined ? context.stage : `${context.stage} of event ${context.eventId}`;
  const next = context.retryInMs === undefined ? '' : `; polling again in ${context.retryInMs} ms`;
  console.warn(`webhook-receiver triggerSource: ${where} failed: ${errorText(error)}${next}`);
}

/** A failure that stops a batch, with where it happened. */
class Stopped {
  constructor(
    readonly cause: unknown,
    readonly context: TriggerErrorContext,
  ) {}
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
  const entry: PulledEntry | undefined = options.receiver === undefined ? undefined : pulledEntryOf(options.receiver);
  if (entry === undefined) throw new TypeError('triggerSource: receiver must be a receiver from createReceiver()');
  if (entry.hasInbox && handler !== undefined) throw new TypeError("triggerSource: the receiver has an inbox, so pulled events are accepted into it and the inbox's workers run the handler: pass no handler");
  if (!entry.hasInbox && typeof handler !== 'function') throw new TypeError('triggerSource: pass a handler, or a receiver with an inbox');
  if (tenant !== undefined && (typeof tenant !== 'string' || tenant === '')) throw new TypeError('triggerSource: tenant must be a non-empty string');
  const dedupBy = new Set(options.dedupBy ?? DEFAULT_DEDUP_BY);
  for (const strategy of dedupBy) if (!STRATEGIES.includes(strategy)) throw new TypeError(`triggerSource: dedupBy holds ${JSON.stringify(strategy)}, not a dedupStrategy (${STRATEGIES.join(', ')})`);
  for (const name of ['onEvent', 'onError', 'sleep', 'random'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') throw new TypeError(`triggerSource: ${name} must be a function`);
  }
  const idle: PullBackoff = pullBackoff(options.idle, 'idle', 1_000, 30_000);
  const failing: PullBackoff = pullBackoff(options.errors, 'errors', 1_000, 60_000);
  const sleep = options.sleep ?? defaultSleep;
  const random = options.random ?? Math.random;
  const onEvent = options.onEvent;
  const onError = options.onError ?? defaultOnError;
  // Checked now, by the client's own rules, rather than on the first wait.
  const waitOptions = { ...(limit === undefined ? {} : { limit }), ...(maxInlineBytes === undefined ? {} : { maxInlineBytes }) };
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 200)) throw new RangeError(`triggerSource: limit must be a whole number from 1 to 200; got ${String(limit)}`);
  if (maxInlineBytes !== undefined && (!Number.isInteger(maxInlineBytes) || maxInlineBytes < 1 || maxInlineBytes > 65_536)) throw new RangeError(`triggerSource: maxInlineBytes must be a whole number from 1 to 65536; got ${String(maxInlineBytes)}`);

  const closing = new AbortController();
  let busy: Promise<unknown> | undefined;

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
    let outcome: PulledEventReport['outcome'];
    try {
      const result = entry!.hasInbox ? await entry!.accept(webhook, contentType) : await entry!.handle(webhook, handler!);
      if (result.outcome === 'in_progress') {
        // Held by another puller or a pushed delivery still running: not done, so not passed.
        throw new RelayPullBusy(webhookId, result.retryAfterSeconds);
      }
      outcome = result.outcome;
    } catch (error) {
      if (error instanceof PermanentError || (isWebhookError(error) && error.status < 500)) {
        tell({ eventId: event.id, webhookId, outcome: 'skipped', verificationState: state, reason: isWebhookError(error) ? `${error.code}: ${error.message}` : errorText(error) });
        report(error, { stage: 'event', eventId: event.id });
        return;
      }
      throw new Stopped(error, { stage: 'event', eventId: event.id });
    }
    tell({ eventId: event.id, webhookId, outcome, verificationState: state });
  }

  async function poll(signal: AbortSignal): Promise<PollResult> {
    let saved: string | null | undefined;
    let batch;
    try {
      saved = await cursor.load();
    } catch (error) {
      throw new Stopped(error, { stage: 'cursor' });
    }
    try {
      batch = await relay.waitTrigger(triggerId, { ...waitOptions, ...(typeof saved === 'string' && saved !== '' ? { cursor: saved } : {}), signal });
    } catch (error) {
      throw new Stopped(error, { stage: 'wait' });
    }
    // In the relay's order, one at a time: ordering and the claims see them as they were captured.
    for (const event of batch.events) {
      if (signal.aborted) throw new Stopped(signal.reason, { stage: 'event', eventId: event.id });
      await processEvent(event, signal);
    }
    const next = batch.nextCursor;
    if (next !== null && next !== saved) {
      try {
        await cursor.save(next);
      } catch (error) {
        throw new Stopped(error, { stage: 'cursor' });
      }
    }
    return { events: batch.events.length, caughtUp: batch.caughtUp, cursor: next ?? undefined };
  }

  function exclusive<T>(work: () => Promise<T>): Promise<T> {
    if (busy !== undefined) return Promise.reject(new TypeError('triggerSource: a poll is already running (one run() or pollOnce() at a time)'));
    if (closing.signal.aborted) return Promise.reject(new TypeError('triggerSource: closed'));
    const running = work();
    // Only to know when it ends: its failure is the caller's, through `running`.
    busy = running.then(
      () => {
        busy = undefined;
      },
      () => {
        busy = undefined;
      },
    );
    return running;
  }

  return {
    pollOnce(pollOptions = {}) {
      return exclusive(async () => {
        const signal = pollOptions.signal === undefined ? closing.signal : AbortSignal.any([closing.signal, pollOptions.signal]);
        try {
          return await poll(signal);
        } catch (error) {
          if (error instanceof Stopped) {
            report(error.cause, error.context);
            throw error.cause;
          }
          throw error;
        }
      });
    },

    run() {
      return exclusive(async () => {
        const signal = closing.signal;
        while (!signal.aborted) {
          let waitMs: number;
          try {
            const result = await poll(signal);
            failing.reset();
            // More waiting: at once. Caught up: from the floor after events, longer each empty poll.
            if (result.events > 0) idle.reset();
            waitMs = result.events > 0 && !result.caughtUp ? 0 : idle.next(1);
          } catch (error) {
            if (signal.aborted) break;
            const stopped = error instanceof Stopped ? error : new Stopped(error, { stage: 'event' });
            const cause = stopped.cause;
            const asked = cause instanceof RelayError && cause.status === 429 && cause.retryAfter !== undefined ? cause.retryAfter * 1000 : cause instanceof RelayPullBusy ? cause.retryAfterMs : undefined;
            waitMs = asked ?? failing.next(Math.min(random(), 0.999999));
            report(cause, { ...stopped.context, retryInMs: waitMs });
          }
          if (waitMs > 0) {
            try {
              await sleep(waitMs, signal);
            } catch {
              // Closed while waiting.
            }
          }
        }
      });
    },

    async close(closeOptions = {}) {
      const timeoutMs = closeOptions.timeoutMs ?? 5_000;
      if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) throw new RangeError('close timeoutMs must be a non-negative number of milliseconds');
      closing.abort(new Error('the trigger source was closed'));
      const running = busy;
      if (running === undefined) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        running.then(
          () => undefined,
          () => undefined,
        ),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}

/** An event whose claim is held elsewhere: the batch stops and is pulled again once that ends. */
class RelayPullBusy extends Error {
  readonly retryAfterMs: number;
  constructor(webhookId: string, retryAfterSeconds: number) {
    super(`event ${webhookId} is being processed elsewhere (its claim is held); pulling it again in ${retryAfterSeconds} s`);
    this.name = 'RelayPullBusy';
    this.retryAfterMs = Math.max(1, retryAfterSeconds) * 1000;
  }
}
