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
import { pulledEntryOf, type PulledEntry } from '../receiver.ts';
import type { Receiver, WebhookContext } from '../receiver/types.ts';
import { rebuiltWebhook, type VerifiedWebhook } from '../verify.ts';
import type { RelayClient } from './client.ts';
import type { CursorStore } from './cursor.ts';
import { RelayError } from './errors.ts';
import { isRelayId, relayId } from './ids.ts';
import { pullBackoff, type PullBackoff, type PullBackoffOptions } from './pull-backoff.ts';
import type { DedupStrategy, TriggerEvent } from './types.ts';

/**
 * What happened to one pulled event, reported to {@link TriggerSourceOptions.onEvent}:
 * `processed` (the handler ran and succeeded), `enqueued` (accepted into the receiver's inbox),
 * `duplicate` (its claim was already completed: an earlier pull, another capture with the same
 * sender's id, or a pushed delivery of it), `stale` (ordering), or `skipped` (never to be
 * processed: the relay's verification `failed`, an unsigned event the receiver refuses, a body the
 * handler refused for good; `reason` says which).
 *
 * @example
 * ```ts
 * import type { PulledEventReport } from 'webhook-receiver/relay';
 * const onEvent = (report: PulledEventReport) => console.log(report.eventId, report.outcome, report.reason ?? '');
 * ```
 */
export interface PulledEventReport {
  /** The relay's event id. */
  eventId: string;
  /** The id it was claimed by: the event id, or its `dedupKey` (see {@link TriggerSourceOptions.dedupBy}). */
  webhookId: string;
  outcome: 'processed' | 'enqueued' | 'duplicate' | 'stale' | 'skipped';
  verificationState: TriggerEvent['verificationState'];
  /** Why a `skipped` event was skipped. */
  reason?: string;
}

/**
 * Where a failure reported to {@link TriggerSourceOptions.onError} happened: the trigger's wait,
 * fetching a body, processing an event (the handler, the claim, the inbox), or saving the cursor.
 *
 * @example
 * ```ts
 * import type { TriggerErrorContext } from 'webhook-receiver/relay';
 * const onError = (error: unknown, context: TriggerErrorContext) => log.warn({ err: error, ...context }, 'relay pull');
 * ```
 */
export interface TriggerErrorContext {
  stage: 'wait' | 'payload' | 'event' | 'cursor';
  eventId?: string;
  /** Milliseconds the loop waits before it polls again (`run()` only). */
  retryInMs?: number;
}

/**
 * Options of {@link triggerSource}.
 *
 * @example
 * ```ts
 * import { createReceiver } from 'webhook-receiver';
 * import { fileCursor, relayClient, type TriggerSourceOptions } from 'webhook-receiver/relay';
 * const options: TriggerSourceOptions = {
 *   relay: relayClient({ baseUrl: process.env.RELAY_URL!, apiKey: process.env.RELAY_API_KEY! }),
 *   triggerId: '0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80',
 *   cursor: fileCursor('.relay-cursor'),
 *   receiver: createReceiver({ secrets: process.env.WEBHOOK_SECRET! }),
 *   handler: async (webhook) => console.log(webhook.json()),
 *   idle: { minMs: 1_000, maxMs: 30_000 },
 * };
 * ```
 */
export interface TriggerSourceOptions {
  relay: RelayClient;
  triggerId: string;
  /** Where the resume cursor is kept: `fileCursor(path)`, `keyValueCursor({ kv, key })` or your own. */
  cursor: CursorStore;
  /**
   * The receiver whose pipeline pulled events go through: its idempotency store and claims,
   * ordering, telemetry, `unsigned` setting and, when it has one, its inbox. Share the receiver of
   * your push endpoint to deduplicate pushed and pulled events together.
   */
  receiver: Receiver;
  /** Runs each event, as `receiver.handle` would. Required without an inbox; refused with one (the inbox's workers run the handler). */
  handler?: (webhook: VerifiedWebhook, context: WebhookContext) => unknown;
  /** Events per wait, 1 to 200 (default: the relay's). */
  limit?: number;
  /** The per-event inline body cap, 1 to 65 536 bytes; a longer body is fetched whole with `payload()`. */
  maxInlineBytes?: number;
  /**
   * The `dedupStrategy` values whose `dedupKey` is the claim's id, so two captures with the same
   * key run once. Default `['sw_webhook_id', 'provider_event_id']`: the sender's own id for one
   * event. `content_hash` and `fields` keys can join distinct events (two identical bodies sent on
   * purpose): add them only if that is what you want. Any other event is claimed by its `id`.
   */
  dedupBy?: readonly DedupStrategy[];
  /** The tenant pulled events are filed under (`webhook.tenant`, the namespace function's input). */
  tenant?: string;
  /** How `run()` polls a trigger that has caught up: exponential from `minMs` (default 1 000) to `maxMs` (default 30 000), back to `minMs` once events come. */
  idle?: PullBackoffOptions;
  /** How `run()` waits after a failure: exponential with jitter from `minMs` (default 1 000) to `maxMs` (default 60 000); a 429 waits its `Retry-After` instead. */
  errors?: PullBackoffOptions;
  /** Called once per event handed out. */
  onEvent?: (report: PulledEventReport) => void;
  /** Called for each failure; default: one line on the console. */
  onError?: (error: unknown, context: TriggerErrorContext) => void;
  /** The wait between polls, for tests: resolve after `ms`, reject when `signal` aborts. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Numbers in [0, 1) for the jitter, for tests. Default `Math.random`. */
  random?: () => number;
}

/**
 * What one {@link TriggerSource.pollOnce} did: how many events the relay handed out, whether the
 * trigger has caught up, and the cursor saved (`undefined` when there was none to save).
 *
 * @example
 * ```ts
 * const { events, caughtUp } = await source.pollOnce();
 * if (!caughtUp) console.log(`${events} events; more are waiting`);
 * ```
 */
export interface PollResult {
  events: number;
  caughtUp: boolean;
  cursor: string | undefined;
}

/**
 * A puller of one trigger. `pollOnce()` for a scheduled invocation (a Cron Worker, a Lambda on a
 * schedule: they cannot run a loop); `run()` for a process; `close()` stops either.
 *
 * @example
 * ```ts
 * const source = triggerSource({ relay, triggerId, cursor, receiver, handler });
 * process.on('SIGTERM', () => void source.close());
 * await source.run();
 * ```
 */
export interface TriggerSource {
  /**
   * One wait, its events processed in order (or accepted into the inbox), then the cursor saved.
   * Rejects with the first failure that stopped the batch (the cursor then stays where it was).
   */
  pollOnce(options?: { signal?: AbortSignal }): Promise<PollResult>;
  /**
   * Polls until {@link TriggerSource.close}: at once while the relay has more, backing off while
   * the trigger is caught up, and after failures (reported to `onError`). Resolves once closed.
   */
  run(): Promise<void>;
  /**
   * Stops: aborts the wait or body fetch in flight, lets an event being processed finish, and
   * resolves once the source has stopped or `timeoutMs` (default 5 000) has passed.
   */
  close(options?: { timeoutMs?: number }): Promise<void>;
}

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
