/**
 * The public shapes of `triggerSource`: its options, what it reports, and the source itself.
 * Below `trigger-source.ts`, which imports them from here.
 */

import type { Receiver, WebhookContext } from '../receiver/types.ts';
import type { VerifiedWebhook } from '../verify.ts';
import type { RelayClient } from './client.ts';
import type { CursorStore } from './cursor.ts';
import type { PullBackoffOptions } from './pull-backoff.ts';
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
