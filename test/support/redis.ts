/**
 * Redis for tests: the shared server from the global setup, private servers for outage tests,
 * both clients (ioredis and node-redis) connected the way an app would, and a MONITOR-based
 * counter of the commands one client sends.
 */

import { randomBytes } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { createClient, type RedisClientOptions } from 'redis';
import { inject } from 'vitest';
import type { RedisClientLike } from '../../src/stores/redis.ts';
import { openMonitor, type MonitorEvent } from './monitor.ts';
import { findRedisServer, isCI } from './redis-server.ts';

export { startRedisServer, type RedisServer } from './redis-server.ts';

/** The shared server's URL, or `null` (then the Redis tests skip; the global setup said why). */
export const sharedRedisUrl: string | null = inject('redisUrl');

/**
 * Whether this file may start its own servers (outage tests stop and restart Redis, which must
 * not disturb the shared one). Without `redis-server` on the PATH such tests skip with a notice,
 * except under CI, where that is a failure.
 */
export function canStartRedis(what: string): boolean {
  if (findRedisServer() !== undefined) return true;
  const notice = `redis-server is not on the PATH, so ${what} cannot start its own Redis`;
  if (isCI()) throw new Error(`${notice}; CI is set, so this is a failure`);
  console.warn(`NOTICE: ${notice}: SKIPPED`);
  return false;
}

export type ClientKind = 'ioredis' | 'node-redis';
export const CLIENT_KINDS: readonly ClientKind[] = ['ioredis', 'node-redis'];

export type NodeRedisClient = ReturnType<typeof createClient>;

/** A connected ioredis client; errors are recorded instead of logged (outage tests cause many). */
export async function connectIORedis(url: string, options: RedisOptions = {}): Promise<Redis> {
  const client = new Redis(url, { lazyConnect: true, ...options });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** A connected node-redis client; an `error` listener is required, or a lost connection crashes the process. */
async function connectNodeRedis(url: string, options: RedisClientOptions = {}): Promise<NodeRedisClient> {
  const client = createClient({ url, ...options });
  client.on('error', () => {});
  await client.connect();
  return client as NodeRedisClient;
}

/** Either client, as the store sees it, plus the plain commands the tests need. */
export interface TestClient {
  readonly kind: ClientKind;
  readonly client: RedisClientLike;
  echo(message: string): Promise<unknown>;
  close(): void;
}

/** Connects a client of `kind` with its library's default settings (offline queue on). */
export async function connectClient(kind: ClientKind, url: string): Promise<TestClient> {
  if (kind === 'ioredis') {
    const client = await connectIORedis(url);
    return { kind, client, echo: (message) => client.echo(message), close: () => client.disconnect() };
  }
  const client = await connectNodeRedis(url);
  return { kind, client, echo: (message) => client.echo(message), close: () => client.destroy() };
}

/** A key prefix no other test (or app sharing a REDIS_URL server) uses. */
export function uniquePrefix(label: string): string {
  return `test:${label}:${randomBytes(6).toString('hex')}:`;
}

/** Every key under `prefix` with its value (strings only) and PTTL, for assertions on what the store wrote. */
export async function keysUnder(admin: Redis, prefix: string): Promise<Record<string, { value: string | null; pttl: number }>> {
  const found: Record<string, { value: string | null; pttl: number }> = {};
  let cursor = '0';
  for (let round = 0; round < 1000; round++) {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    for (const key of keys) {
      const value = (await admin.type(key)) === 'string' ? await admin.get(key) : null;
      found[key.slice(prefix.length)] = { value, pttl: await admin.pttl(key) };
    }
    cursor = next;
    if (cursor === '0') break;
  }
  return found;
}

/** Deletes every key under `prefix` (tests may share a REDIS_URL server with other data). */
export async function deleteKeysUnder(admin: Redis, prefix: string): Promise<void> {
  const keys = Object.keys(await keysUnder(admin, prefix)).map((key) => prefix + key);
  if (keys.length > 0) await admin.del(...keys);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Counts the commands (round trips) that `client` sends while `work` runs, as the server saw them
 * through MONITOR. Commands a Lua script runs are reported by MONITOR with the source `lua` and are
 * not round trips, so they are left out; so is every other connection's traffic.
 */
export { parseMonitorLine } from './monitor.ts';

export async function countRoundTrips(url: string, client: TestClient, work: () => Promise<void>): Promise<{ count: number; commands: string[] }> {
  const events: MonitorEvent[] = [];
  const monitor = await openMonitor(url, (event) => events.push(event));
  const marker = (name: string) => `round-trip-marker-${name}-${randomBytes(4).toString('hex')}`;
  const seen = async (message: string) => {
    for (let i = 0; i < 200; i++) {
      const event = events.find((e) => e.args[0]?.toLowerCase() === 'echo' && e.args[1] === message);
      if (event) return events.indexOf(event);
      await sleep(10);
    }
    throw new Error(`MONITOR never showed ${message}`);
  };
  try {
    const start = marker('start');
    await client.echo(start);
    const from = await seen(start);
    const source = events[from]!.source;
    await work();
    const end = marker('end');
    await client.echo(end);
    const to = await seen(end);
    const commands = events.slice(from + 1, to).filter((e) => e.source === source).map((e) => e.args[0]!.toLowerCase());
    return { count: commands.length, commands };
  } finally {
    monitor.close();
  }
}
