/**
 * The pull loop under `triggerSource` and the CLI's `relay pull`: load the cursor, wait on the
 * trigger, hand each event to the caller in the relay's order, and save the cursor only once the
 * whole batch went through. `run()` repeats that with the idle and error backoffs, `pollOnce()`
 * does it once, `close()` stops either. What one event becomes (a claim in a receiver, a request
 * to a local endpoint) is the caller's; where to resume, how long to wait and when to stop are
 * written here once.
 */

import type { RelayClient, WaitTriggerOptions } from './client.ts';
import type { CursorStore } from './cursor.ts';
import { RelayError } from './errors.ts';
import { pullBackoff, type PullBackoffOptions } from './pull-backoff.ts';
import { sleep as abortableSleep } from './transport.ts';
import type { PollResult, TriggerErrorContext, TriggerSource } from './trigger-types.ts';
import type { TriggerEvent } from './types.ts';

/** A failure that stops a batch, with where it happened. */
export class Stopped {
  constructor(
    readonly cause: unknown,
    readonly context: TriggerErrorContext,
  ) {}
}

/** A failure that says how long to wait before the batch is pulled again (a held claim). */
export class RetryLater extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
    this.name = 'RetryLater';
  }
}

/** What the loop needs; the caller has checked every value. */
export interface TriggerLoopOptions {
  relay: RelayClient;
  triggerId: string;
  cursor: CursorStore;
  /** Sent with each wait, besides the cursor. */
  wait: Pick<WaitTriggerOptions, 'limit' | 'maxInlineBytes' | 'inlineBodies'>;
  idle?: PullBackoffOptions | undefined;
  errors?: PullBackoffOptions | undefined;
  sleep?: ((ms: number, signal: AbortSignal) => Promise<void>) | undefined;
  random?: (() => number) | undefined;
  /** One event; a throw stops the batch (a {@link Stopped} says where, else it was the event). */
  each(event: TriggerEvent, signal: AbortSignal): Promise<void>;
  /** Each failure, with where it happened (and, in `run()`, the wait before the next poll). */
  report(error: unknown, context: TriggerErrorContext): void;
}

/** The event's id when it has one to name (a malformed event may not). */
function idOf(event: unknown): string | undefined {
  const id = typeof event === 'object' && event !== null ? (event as { id?: unknown }).id : undefined;
  return typeof id === 'string' ? id : undefined;
}

/** A trigger source around `options.each`: see the module's comment. */
export function triggerLoop(options: TriggerLoopOptions): TriggerSource {
  const { relay, triggerId, cursor, wait, each, report } = options;
  const idle = pullBackoff(options.idle, 'idle', 1_000, 30_000);
  const failing = pullBackoff(options.errors, 'errors', 1_000, 60_000);
  const sleep = options.sleep ?? abortableSleep;
  const random = options.random ?? Math.random;
  const closing = new AbortController();
  let busy: Promise<unknown> | undefined;

  async function poll(signal: AbortSignal): Promise<PollResult> {
    let saved: string | null | undefined;
    let batch;
    try {
      saved = await cursor.load();
    } catch (error) {
      throw new Stopped(error, { stage: 'cursor' });
    }
    try {
      batch = await relay.waitTrigger(triggerId, { ...wait, ...(typeof saved === 'string' && saved !== '' ? { cursor: saved } : {}), signal });
    } catch (error) {
      throw new Stopped(error, { stage: 'wait' });
    }
    // In the relay's order, one at a time: ordering and the claims see them as they were captured.
    for (const event of batch.events) {
      const eventId = idOf(event);
      if (signal.aborted) throw new Stopped(signal.reason, { stage: 'event', eventId });
      try {
        await each(event, signal);
      } catch (error) {
        throw error instanceof Stopped ? error : new Stopped(error, { stage: 'event', eventId });
      }
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
            const asked = cause instanceof RelayError && cause.status === 429 && cause.retryAfter !== undefined ? cause.retryAfter * 1000 : cause instanceof RetryLater ? cause.retryAfterMs : undefined;
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
