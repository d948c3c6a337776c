/**
 * One app instance of the ordering proof, run as a child process (`node --import tsx`):
 * Express behind this package's adapter, with `ordering: { key, version }` on a shared Redis or
 * PostgreSQL store. Its handler applies an event to the entity's state and logs what it applied,
 * in the same shared backend the store uses, in the order it applied it: a Redis list (RPUSH) or
 * a PostgreSQL table with a sequence. The first attempt of some events fails (after nothing was
 * applied), so their sender retries them. Configuration comes from the environment (the secret
 * never appears in a command line); the instance reports `{ ready: port }` over IPC.
 */

import type { Server } from 'node:http';
import express from 'express';
import { webhooks } from '../../adapters/express.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const backend = env('ORDERING_BACKEND');
const url = env('ORDERING_URL');
const port = Number(env('ORDERING_PORT'));
const secret = env('ORDERING_SECRET');
const space = env('ORDERING_SPACE');

/** What the handler does to the shared backend: fail once, then apply and log. */
interface Effects {
  /** True the first time an event id asks (shared by both instances). */
  firstAttempt(id: string): Promise<boolean>;
  apply(entity: string, version: number): Promise<void>;
}

async function connect(): Promise<{ store: IdempotencyStore; effects: Effects }> {
  if (backend === 'redis') {
    const { Redis } = await import('ioredis');
    const { redisStore } = await import('../../src/stores/redis.ts');
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    await client.connect();
    return {
      store: redisStore({ client, prefix: `${space}:` }),
      effects: {
        firstAttempt: async (id) => (await client.incr(`${space}:attempts:${id}`)) === 1,
        async apply(entity, version) {
          // One script: the log line and the state change happen together.
          await client.eval(`redis.call('RPUSH', KEYS[1], ARGV[1] .. ' ' .. ARGV[2]) redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) return 1`, 2, `${space}:log`, `${space}:state`, entity, String(version));
        },
      },
    };
  }
  const { default: pg } = await import('pg');
  const { postgresStore } = await import('../../src/stores/postgres.ts');
  const pool = new pg.Pool({ connectionString: url, max: 8 });
  const store = postgresStore({ client: pool, table: `${space}_claims` });
  await store.setup();
  return {
    store,
    effects: {
      firstAttempt: async (id) => (await pool.query(`INSERT INTO ${space}_attempts (id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1`, [id])).rows.length === 1,
      async apply(entity, version) {
        await pool.query(
          `WITH logged AS (INSERT INTO ${space}_log (entity, version) VALUES ($1, $2))
           INSERT INTO ${space}_state (entity, version) VALUES ($1, $2) ON CONFLICT (entity) DO UPDATE SET version = excluded.version`,
          [entity, version],
        );
      },
    },
  };
}

const { store, effects } = await connect();

const app = express();
app.post(
  '/webhooks',
  webhooks({
    secrets: secret,
    idempotency: { store, lockSeconds: 10 },
    ordering: { key: (event) => event.data.id, version: (event) => event.timestamp },
    // The sender sees every refusal in its answer; the test needs no log of them.
    onRejected: () => {},
  }),
  async (req, res) => {
    const event = req.webhook!.json<{ timestamp: string; data: { id: string; v: number; failFirst: boolean } }>();
    if (event.data.failFirst && (await effects.firstAttempt(req.webhook!.id))) {
      res.status(500).json({ error: 'HANDLER_FAILED', message: 'the first attempt of this event fails on purpose' });
      return;
    }
    await effects.apply(event.data.id, event.data.v);
    res.status(204).end();
  },
);

const server: Server = await new Promise((resolve) => {
  const listening = app.listen(port, '127.0.0.1', () => resolve(listening));
});
process.send?.({ ready: (server.address() as { port: number }).port });
// The parent ends this process; leaving with it too.
process.on('disconnect', () => process.exit(0));
