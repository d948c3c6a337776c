/**
 * `redisStore` with an `@upstash/redis` client. Upstash's service is not reachable
 * from tests, so its REST protocol (one JSON command array per POST, `{ result }` or
 * `{ error }` back, strings base64-encoded on request) is served here on 127.0.0.1 by a small
 * bridge that runs each command on the real redis-server. Everything on the client's side is the
 * real `@upstash/redis` package; what this cannot show is the Upstash service's own behaviour
 * (its script cache, limits, and latency).
 */

import { createServer, type Server } from 'node:http';
import { Redis as Upstash } from '@upstash/redis';
import type { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore, type RedisClientLike, type UpstashRedisClientLike } from '../../src/stores/redis.ts';
import { checkStore } from '../../src/testing/check-store.ts';
import { connectIORedis, sharedRedisUrl, uniquePrefix } from '../support/redis.ts';
import { findRedisServer, freePort, startRedisServer, type RedisServer } from '../support/redis-server.ts';

// It starts a redis-server of its own (see beforeAll), so it needs the binary, not only a URL.
const available = sharedRedisUrl !== null && findRedisServer() !== undefined;
let bridge: Server;
let redis: IORedis;
let server: RedisServer;
let url: string;
/** Every command the bridge received, as Upstash sent it. */
const commands: unknown[][] = [];

const encode = (value: unknown): unknown =>
  typeof value === 'string' ? Buffer.from(value).toString('base64') : Array.isArray(value) ? value.map(encode) : value;

beforeAll(async () => {
  if (!available) return;
  // A redis-server of this file's own: the script cache is server-wide, and another file on the
  // shared server may load a script between this file's SCRIPT FLUSH and its EVALSHA.
  server = await startRedisServer();
  redis = await connectIORedis(server.url);
  bridge = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const base64 = request.headers['upstash-encoding'] === 'base64';
      const run = async (command: (string | number)[]): Promise<{ result?: unknown; error?: string }> => {
        commands.push(command);
        const [name, ...args] = command;
        try {
          const result = await redis.call(String(name), ...args.map(String));
          return { result: base64 ? encode(result) : result };
        } catch (error) {
          return { error: (error as Error).message };
        }
      };
      const answer = (status: number, reply: unknown) => {
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify(reply));
      };
      // `/pipeline` (the client batches commands on its own): an array of commands, one reply each.
      if (request.url === '/pipeline') {
        void (async () => {
          const replies = [];
          for (const command of JSON.parse(body) as (string | number)[][]) replies.push(await run(command));
          answer(200, replies);
        })();
        return;
      }
      void run(JSON.parse(body) as (string | number)[]).then((reply) => answer(reply.error === undefined ? 200 : 400, reply));
    });
  });
  await new Promise<void>((resolve) => bridge.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(bridge.address() as { port: number }).port}`;
});

afterAll(async () => {
  if (!available) return;
  await new Promise<void>((resolve) => bridge.close(() => resolve()));
  redis.disconnect();
  await server.close();
});

const upstash = (base: string) => new Upstash({ url: base, token: 'test-token', retry: false, enableTelemetry: false });

describe('redisStore with an @upstash/redis client', () => {
  it('accepts the client by type (no TS2322), and tells it from ioredis by shape', async () => {
    const client: UpstashRedisClientLike = upstash('http://127.0.0.1:1');
    const asUnion: RedisClientLike = upstash('http://127.0.0.1:1');
    expect(typeof redisStore({ client: upstash('http://127.0.0.1:1') }).claim).toBe('function');
    expect([typeof client.evalsha, typeof asUnion]).toEqual(['function', 'object']);
    // The Upstash path: keys and arguments as two arrays. The ioredis path, which has `evalsha`
    // too, would pass (sha, 1, key, ...args) and Upstash would send a malformed command. (Without
    // auto-pipelining, whose proxy would not see the method replaced.)
    const direct: UpstashRedisClientLike = new Upstash({ url: 'http://127.0.0.1:1', token: 'test-token', retry: false, enableTelemetry: false, enableAutoPipelining: false });
    const calls: unknown[][] = [];
    const evalsha = direct.evalsha.bind(direct);
    direct.evalsha = (...args: Parameters<UpstashRedisClientLike['evalsha']>) => {
      calls.push(args);
      return evalsha(...args);
    };
    // Nothing listens on port 1: the claim rejects, after the store chose how to call.
    await expect(redisStore({ client: direct, prefix: 'p:', timeoutMs: 2000 }).claim('ns:s:msg_1', 1000)).rejects.toThrow();
    expect(calls).toEqual([[expect.stringMatching(/^[0-9a-f]{40}$/), ['p:ns:s:msg_1'], [expect.stringMatching(/^[0-9a-f]{32}$/), '1000']]]);
  });

  it.skipIf(!available)('keeps every rule of the store contract over its REST protocol, on a real redis-server', async () => {
    const prefix = uniquePrefix('upstash');
    const report = await checkStore(() => redisStore({ client: upstash(url), prefix }), {
      shared: true,
      tokenPattern: /^[0-9a-f]{32}$/,
      unreachable: async () => redisStore({ client: upstash(`http://127.0.0.1:${await freePort()}`), timeoutMs: 500 }),
    });
    expect(report.failed).toBe(0);
    // The contract's 17 rules and the 10 ordering rules.
    expect(report.passed).toBe(27);
  });

  it.skipIf(!available)('sends EVALSHA with the key and arguments, and EVAL once when the server answers NOSCRIPT', async () => {
    await redis.call('SCRIPT', 'FLUSH');
    commands.length = 0;
    const prefix = uniquePrefix('upstash-commands');
    const store = redisStore({ client: upstash(url), prefix });
    const claimed = await store.claim('ns:s:msg_1', 1500.5);
    expect(claimed.status).toBe('acquired');
    const token = claimed.status === 'acquired' ? claimed.token : '';
    expect(await store.complete('ns:s:msg_1', token, 60_000)).toBe(true);
    expect(commands.map(([name, , keys, key, ...args]) => [name, keys, key, ...args])).toEqual([
      ['evalsha', 1, `${prefix}ns:s:msg_1`, token, '1501'],
      ['eval', 1, `${prefix}ns:s:msg_1`, token, '1501'],
      ['evalsha', 1, `${prefix}ns:s:msg_1`, token, '60000'],
      ['eval', 1, `${prefix}ns:s:msg_1`, token, '60000'],
    ]);
    commands.length = 0;
    expect(await store.claim('ns:s:msg_1', 1000)).toEqual({ status: 'completed' });
    expect(commands.map(([name]) => name)).toEqual(['evalsha']);
    expect(await redis.get(`${prefix}ns:s:msg_1`)).toBe(`done:${token}`);
    await redis.del(`${prefix}ns:s:msg_1`);
  });
});
