/**
 * Vitest global setup: one shared `redis-server` for the whole run.
 *
 * - `REDIS_URL` set: the tests use that server.
 * - Otherwise, `redis-server` on the PATH: started here on a free loopback port, stopped at the end.
 * - Neither: the Redis tests are skipped with a notice, except under CI, where that is a failure.
 * - Only the unit tier running: nothing is started (it needs no server).
 *
 * Tests read the outcome with `inject('redisUrl')` (see ./redis.ts).
 */

import type { TestProject } from 'vitest/node';
import { findRedisServer, redisMissingUnderCI, startRedisServer, type RedisServer } from './redis-server.ts';
import { onlyUnitTier } from './tiers.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The shared Redis for tests, or `null` when there is none (the Redis tests skip). */
    redisUrl: string | null;
  }
}

let server: RedisServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  if (onlyUnitTier(project)) {
    project.provide('redisUrl', null);
    return;
  }
  const url = process.env.REDIS_URL;
  if (url !== undefined && url !== '') {
    project.provide('redisUrl', url);
    return;
  }
  if (findRedisServer() === undefined) {
    const missing = redisMissingUnderCI();
    // vitest.config.ts stops the run before this; kept for a config that does not.
    if (missing !== undefined) throw new Error(missing);
    const notice = 'redis-server is not on the PATH and REDIS_URL is unset, so the Redis tests are SKIPPED';
    console.warn(`\n  NOTICE: ${notice}.\n  Install redis-server or set REDIS_URL=redis://host:port to run them.\n`);
    project.provide('redisUrl', null);
    return;
  }
  server = await startRedisServer();
  project.provide('redisUrl', server.url);
}

export async function teardown(): Promise<void> {
  await server?.close();
  server = undefined;
}
