/**
 * The long-running worker's loop on the SDK: long polls for as many messages as it has free slots
 * (at most 10 a receive), starts each the moment it arrives and polls again as soon as a slot is
 * free, so one slow job never idles the others. While a handler runs its message's visibility is
 * renewed (the heartbeat); when it ends the message is settled and, when done, deleted.
 */

import type { JobRunner } from '../worker.ts';
import type { EngineStop } from '../lifecycle.ts';
import type { ReceivedMessage } from './client.ts';
import { changeVisibility, open, receivedOf, settle, type SettleContext } from './settle.ts';

/** How the loop polls. */
export interface PollSettings {
  /** The visibility a receive sets, and each heartbeat renews. */
  visibilitySeconds: number;
  /** How often the heartbeat renews it. */
  heartbeatMs: number;
  /** Long polling: how long a receive waits for a message (0 to 20). */
  waitSeconds: number;
}

/** What every receive asks SQS for besides the body. */
export const SYSTEM_ATTRIBUTES = ['ApproximateReceiveCount', 'ApproximateFirstReceiveTimestamp', 'SentTimestamp', 'MessageGroupId'];

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

/** Starts the loop; the returned stop is what `worker.close()` calls (see `JobRunner.close`). */
export function startPolling(context: SettleContext, runner: JobRunner, settings: PollSettings): EngineStop {
  const inFlight = new Set<Promise<void>>();
  const poller = new AbortController();
  // FIFO queues take no per-message delay: a deferral there keeps the message (so its group stays
  // in order) and so spends a receive, which the runner reports as the attempt it becomes.
  const spendsAttempt = context.fifo ? () => true : undefined;
  let wake: (() => void) | undefined;

  const handle = async (message: ReceivedMessage): Promise<void> => {
    const handleOf = message.ReceiptHandle;
    if (handleOf === undefined) return;
    const opened = open(receivedOf(handleOf, message.Body, message.Attributes));
    const heartbeat = setInterval(() => {
      changeVisibility(context, handleOf, settings.visibilitySeconds).catch((error: unknown) => runner.report(error, 'renew', opened.webhookId));
    }, settings.heartbeatMs);
    let verdict;
    try {
      verdict = await runner.run({ data: opened.envelope.job, attempt: opened.attempt, spendsAttempt });
    } finally {
      clearInterval(heartbeat);
    }
    if ((await settle(context, runner, opened, verdict)) === 'done') {
      try {
        await context.requests.send('DeleteMessage', context.timeoutMs, (sdk) => new sdk.DeleteMessageCommand({ QueueUrl: context.queueUrl, ReceiptHandle: handleOf }));
      } catch (error) {
        // Received again once its visibility ends: the worker's claim skips what already ran.
        runner.report(error, 'settle', opened.webhookId);
      }
    }
  };

  const start = (message: ReceivedMessage) => {
    const run = handle(message).catch((error: unknown) => runner.report(error, 'settle', '(unsettled message)'));
    inFlight.add(run);
    void run.finally(() => {
      inFlight.delete(run);
      wake?.();
    });
  };

  /** Resolves when a job ends or the worker stops; leaves no listener behind either way. */
  const slotFree = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        wake = undefined;
        poller.signal.removeEventListener('abort', done);
        resolve();
      };
      wake = done;
      poller.signal.addEventListener('abort', done, { once: true });
    });

  const loop = async (): Promise<void> => {
    let failures = 0;
    while (!poller.signal.aborted) {
      const free = runner.concurrency - inFlight.size;
      if (free <= 0) {
        await slotFree();
        continue;
      }
      const asked = Date.now();
      let messages: ReceivedMessage[];
      try {
        const reply = await context.requests.send<{ Messages?: ReceivedMessage[] }>(
          'ReceiveMessage',
          (settings.waitSeconds + 10) * 1000,
          (sdk) =>
            new sdk.ReceiveMessageCommand({
              QueueUrl: context.queueUrl,
              MaxNumberOfMessages: Math.min(10, free),
              WaitTimeSeconds: settings.waitSeconds,
              VisibilityTimeout: settings.visibilitySeconds,
              MessageSystemAttributeNames: SYSTEM_ATTRIBUTES,
            }),
          poller.signal,
        );
        messages = reply?.Messages ?? [];
        failures = 0;
      } catch (error) {
        if (poller.signal.aborted) break;
        runner.report(error, 'settle', '(receive)');
        failures++;
        // The queue is unreachable: poll again after a growing pause, up to 5 s.
        await pause(Math.min(5000, 100 * 2 ** failures), poller.signal);
        continue;
      }
      for (const message of messages) start(message);
      // A long poll answered empty at once (an emulator, a queue being purged): not a busy loop.
      if (messages.length === 0 && settings.waitSeconds > 0 && Date.now() - asked < 100) await pause(100, poller.signal);
    }
  };
  const looping = loop();

  return {
    async stop() {
      poller.abort();
      await looping;
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
    async force() {
      poller.abort();
      await looping;
    },
  };
}
