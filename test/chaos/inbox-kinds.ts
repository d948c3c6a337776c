/** What the inbox chaos test and its workers share: which ids fail, and the inboxes both sides build. */

import type { Queue } from 'bullmq';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { pgBossInbox, type PgBossLike } from '../../src/inbox/pg-boss.ts';
import { sqsInbox, type SqsClientLike } from '../../src/inbox/sqs/index.ts';
import type { Inbox } from '../../src/inbox/types.ts';

/** Which ids fail, by their number (`msg_chaos_<n>`). */
export function kindOf(id: string): 'flaky' | 'poison' | 'plain' {
  const n = Number(id.slice(id.lastIndexOf('_') + 1));
  if (n % 50 === 7) return 'poison';
  if (n % 10 === 3) return 'flaky';
  return 'plain';
}

const silent = { warn: () => {}, error: () => {} };

/**
 * Two kills of one job must not fail it: BullMQ fails a job stalled more than `maxStalledCount`
 * times. Locks (BullMQ's and the workers' claims) outlast the server's restart, as in production.
 */
export function chaosBullmqInbox(queue: Queue): Inbox {
  return bullmqInbox({ queue, maxAttempts: 4, backoff: { delayMs: 100 }, timeoutMs: 1000, logger: silent, workerOptions: { lockDuration: 5000, stalledInterval: 1000, maxStalledCount: 5 } });
}

/**
 * A killed worker's job stays active until `expireInSeconds`, then pg-boss retries it (an attempt):
 * 3 s here, so the run fits its budget; a fifth attempt covers two failures and two kills.
 */
export function chaosPgBossInbox(boss: PgBossLike, queue: string): Inbox {
  return pgBossInbox({ boss, queue, maxAttempts: 5, backoff: { delayMs: 0 }, timeoutMs: 1000, pollingIntervalSeconds: 0.5, queueOptions: { expireInSeconds: 3 } });
}

/**
 * A killed worker's messages come back when their visibility ends (the claim's lock, 5 s here) and
 * count the receive as an attempt; a fifth attempt covers two failures and two kills. The redrive
 * policy (8 receives) stays above it.
 */
export function chaosSqsInbox(client: SqsClientLike, queueUrl: string): Inbox {
  return sqsInbox({ client, queueUrl, maxAttempts: 5, backoff: { delayMs: 0 }, timeoutMs: 1000, visibilityTimeoutSeconds: 5, waitTimeSeconds: 1, logger: silent });
}
