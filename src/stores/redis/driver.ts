/** What the Redis store needs of a client library, for each library it accepts, told apart by shape. */

import { describeValue } from '../internal.ts';
import type { IORedisClientLike, NodeRedisClientLike, RedisClientLike, UpstashRedisClientLike } from './client.ts';

/** One client library, seen through the two commands the store sends and its connection state. */
export interface ScriptClient {
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  eval(source: string, keys: string[], args: string[]): Promise<unknown>;
  /** `true` connected, `false` not, `undefined` the client does not say. */
  connected(): boolean | undefined;
  ping(): Promise<unknown>;
}

function ioredisScripts(client: IORedisClientLike): ScriptClient {
  return {
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
    connected: () => (typeof client.status === 'string' ? client.status === 'ready' : undefined),
    ping: () => (typeof client.ping === 'function' ? client.ping() : client.eval('return 1', 0)),
  };
}

function nodeRedisScripts(client: NodeRedisClientLike): ScriptClient {
  return {
    evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
    eval: (source, keys, args) => client.eval(source, { keys, arguments: args }),
    connected: () => (typeof client.isReady === 'boolean' ? client.isReady : undefined),
    ping: () => (typeof client.ping === 'function' ? client.ping() : client.eval('return 1', { keys: [], arguments: [] })),
  };
}

function upstashScripts(client: UpstashRedisClientLike): ScriptClient {
  return {
    evalsha: (sha, keys, args) => client.evalsha(sha, keys, args),
    eval: (source, keys, args) => client.eval(source, keys, args),
    // Over HTTP there is no connection to lose: every command is a request, bounded by timeoutMs.
    connected: () => undefined,
    ping: () => (typeof client.ping === 'function' ? client.ping() : client.eval('return 1', [], [])),
  };
}

/** The client's library, told by shape: `evalSha` is node-redis, `evalsha` Upstash (with `createScript`) or ioredis. */
export function scriptClientFor(client: RedisClientLike): ScriptClient {
  // Anything else (undefined, a URL string) ends in the TypeError below, which names what it got.
  const candidate = client as (Partial<IORedisClientLike> & Partial<NodeRedisClientLike> & Partial<UpstashRedisClientLike>) | null | undefined;
  const ioredisStatus = typeof candidate?.status === 'string';
  if (typeof candidate?.evalsha === 'function' && typeof candidate.createScript === 'function' && !ioredisStatus && typeof candidate.eval === 'function') {
    return upstashScripts(client as UpstashRedisClientLike);
  }
  if (typeof candidate?.evalsha === 'function' && typeof candidate.eval === 'function') return ioredisScripts(client as IORedisClientLike);
  if (typeof candidate?.evalSha === 'function' && typeof candidate.eval === 'function') return nodeRedisScripts(client as NodeRedisClientLike);
  throw new TypeError(
    `redisStore client must be a connected ioredis, redis (node-redis) or @upstash/redis client: ${describeValue(client)} has neither evalsha() (ioredis, Upstash) nor evalSha() (node-redis)`,
  );
}
