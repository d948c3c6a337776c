/**
 * One puller of the relay-pull chaos test, run as a child process (`node --import tsx`) so that it
 * can be killed for real: `triggerSource(...).run()` pulling the emulator's trigger into a BullMQ
 * inbox, with the receiver's accepting claims in a `redisStore` and the cursor under a Redis key.
 * Reports `{ ready: true }` over IPC once it runs, and `{ accepted: n }` after each event it handed
 * to the inbox (enqueued or answered as a duplicate), so the test can kill it mid-batch. The API
 * key comes from the environment, as an app's would.
 */

import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createReceiver } from '../../src/index.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { keyValueCursor, relayClient, triggerSource } from '../../src/relay/index.ts';
import { redisStore } from '../../src/stores/redis.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const url = env('PULL_REDIS_URL');
const prefix = env('PULL_PREFIX');

const connection = new Redis(url, { maxRetriesPerRequest: null });
connection.on('error', () => {});
const storeClient = new Redis(url, { maxRetriesPerRequest: 1 });
storeClient.on('error', () => {});
const queue = new Queue(env('PULL_QUEUE'), { connection, prefix: 'test-pull-chaos' });
queue.on('error', () => {});
const inbox = bullmqInbox({ queue, backoff: { delayMs: 0 }, logger: { warn: () => {}, error: () => {} } });
const receiver = createReceiver({
  secrets: env('PULL_SECRET'),
  inbox,
  // A killed puller's accepting claim holds for its lock: short, so the next puller takes over soon.
  idempotency: { store: redisStore({ client: storeClient, prefix }), lockSeconds: 2 },
  logger: { warn: () => {}, error: () => {} },
});
let accepted = 0;
const source = triggerSource({
  relay: relayClient({ baseUrl: env('RELAY_URL'), apiKey: env('RELAY_API_KEY') }),
  triggerId: env('PULL_TRIGGER'),
  cursor: keyValueCursor({ kv: storeClient, key: `${prefix}cursor` }),
  receiver,
  limit: 50,
  idle: { minMs: 50, maxMs: 200 },
  errors: { minMs: 50, maxMs: 500 },
  onEvent: (report) => {
    if (report.outcome === 'enqueued' || report.outcome === 'duplicate') process.send?.({ accepted: ++accepted });
  },
  onError: (error) => process.env.CHAOS_TRACE === '1' && console.error(`puller: ${(error as Error).message}`),
});
process.send?.({ ready: true });
await source.run();
