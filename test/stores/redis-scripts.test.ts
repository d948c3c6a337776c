/**
 * The Redis store's Lua, loaded into a real redis-server: every script the `.lua.ts` modules
 * export is accepted by `SCRIPT LOAD` under the SHA-1 the store sends it by, the store runs exactly
 * those scripts, and each one, run by that SHA-1 on a small fixture, answers as the store reads it.
 * The store's own tests cover the scripts again through the store; this file names the script that
 * breaks.
 */

import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as claimsLua from '../../src/stores/redis/claims.lua.ts';
import * as orderingLua from '../../src/stores/redis/ordering.lua.ts';
import * as unsignedLua from '../../src/stores/redis/unsigned.lua.ts';
import { scriptClientFor, type ScriptClient } from '../../src/stores/redis/driver.ts';
import { ENTITY_CLAIM_SCRIPT, ENTITY_COMPLETE_SCRIPT, ENTITY_EXTEND_SCRIPT, ENTITY_RELEASE_SCRIPT, FORGET_VERSION_SCRIPT, runScript, SIGNED, UNSIGNED } from '../../src/stores/redis/scripts.ts';
import { connectIORedis, sharedRedisUrl, uniquePrefix } from '../support/redis.ts';

/** Every script text the modules export, by module and name. */
const texts: [string, string][] = Object.entries({ claims: claimsLua, unsigned: unsignedLua, ordering: orderingLua }).flatMap(([module, exports]) =>
  Object.entries(exports).map(([name, text]): [string, string] => [`${module}.lua.ts ${name}`, text]),
);

/** The scripts the store runs, as it holds them (their text, and the SHA-1 it computes on first use). */
const storeScripts = [...Object.values(SIGNED), ...Object.values(UNSIGNED), ENTITY_CLAIM_SCRIPT, ENTITY_COMPLETE_SCRIPT, ENTITY_RELEASE_SCRIPT, ENTITY_EXTEND_SCRIPT, FORGET_VERSION_SCRIPT];

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
/** A token as the store makes them: 32 hex digits (the unsigned scripts read the time after it). */
const newToken = () => randomBytes(16).toString('hex');

describe('the Redis store\'s Lua modules', () => {
  it('export only script texts, and the store runs each of them, and nothing else', () => {
    expect(texts.length).toBeGreaterThanOrEqual(13);
    for (const [name, text] of texts) expect(typeof text, name).toBe('string');
    const run = storeScripts.map((script) => script.source);
    expect(new Set(run)).toEqual(new Set(texts.map(([, text]) => text)));
    expect(run).toHaveLength(texts.length);
  });
});

describe.skipIf(sharedRedisUrl === null)('the Redis store\'s Lua on a real redis-server', () => {
  let admin: Redis;
  const prefix = uniquePrefix('lua');
  /** The SHA-1 each text was loaded under. */
  const loaded = new Map<string, string>();
  const load = async (name: string, text: string): Promise<string> => {
    try {
      const sha = (await admin.script('LOAD', text)) as string;
      loaded.set(text, sha);
      return sha;
    } catch (error) {
      throw new Error(`${name} does not load into Redis: ${(error as Error).message}`, { cause: error });
    }
  };
  /**
   * The store's client of the real server, by SHA-1 only: every script is loaded before it runs,
   * so a fall back to EVAL would mean the store names a script by another SHA-1 than Redis does.
   */
  let byShaOnly: ScriptClient;
  /**
   * Runs a script as the store does (runScript, by the SHA-1 the store computes), after loading it
   * (again, when this test runs alone).
   */
  const run = async (text: string, keys: string[], args: (string | number)[]) => {
    if (!loaded.has(text)) await load('a script', text);
    return runScript(byShaOnly, storeScripts.find((script) => script.source === text)!, keys, args.map(String));
  };

  beforeAll(async () => {
    admin = await connectIORedis(sharedRedisUrl!);
    byShaOnly = {
      ...scriptClientFor(admin),
      eval: () => Promise.reject(new Error('the store sent a loaded script by a SHA-1 that Redis does not know')),
    };
  });
  afterAll(async () => {
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(...keys);
    admin.disconnect();
  });

  it('SCRIPT LOAD accepts every script, under the SHA-1 the store sends it by', async () => {
    // Redis answers the SHA-1 of the text, whatever the store computes: the fixtures below run each
    // script through the store's runScript with no fall back to EVAL, which holds the store to it.
    for (const [name, text] of texts) expect(await load(name, text), name).toBe(sha1(text));
    expect(await admin.script('EXISTS', ...loaded.values())).toEqual(texts.map(() => 1));
  });

  it('signed ids: claim, extend, complete, release answer as the store reads them', async () => {
    const { CLAIM, COMPLETE, EXTEND, RELEASE } = claimsLua;
    const key = `${prefix}ns:s:one`;
    const [owner, other] = [newToken(), newToken()];
    expect(await run(CLAIM, [key], [owner, 60_000])).toBe(0);
    expect(await admin.get(key)).toBe(`lock:${owner}`);
    const left = (await run(CLAIM, [key], [other, 60_000])) as number;
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(60_000);
    expect(await run(EXTEND, [key], [other, 120_000])).toBe(0);
    expect(await run(EXTEND, [key], [owner, 120_000])).toBe(1);
    expect(await admin.pttl(key)).toBeGreaterThan(60_000);
    expect(await run(RELEASE, [key], [other])).toBe(0);
    expect(await run(COMPLETE, [key], [other, 30_000])).toBe(0);
    expect(await run(COMPLETE, [key], [owner, 30_000])).toBe(1);
    expect(await admin.get(key)).toBe(`done:${owner}`);
    expect(await run(COMPLETE, [key], [owner, 30_000])).toBe(1);
    expect(await run(CLAIM, [key], [other, 60_000])).toBe(-1);
    expect(await run(RELEASE, [key], [owner])).toBe(0);

    const released = `${prefix}ns:s:two`;
    expect(await run(CLAIM, [released], [owner, 60_000])).toBe(0);
    expect(await run(RELEASE, [released], [owner])).toBe(1);
    expect(await admin.exists(released)).toBe(0);
    // A key without an expiry (never written by the store) answers -2.
    await admin.set(`${prefix}ns:s:bare`, 'lock:someone');
    expect(await run(CLAIM, [`${prefix}ns:s:bare`], [owner, 60_000])).toBe(-2);
  });

  it('unsigned ids: a bucket of two ways takes over a completion, then refuses when all are live', async () => {
    const { UNSIGNED_CLAIM, UNSIGNED_COMPLETE, UNSIGNED_EXTEND, UNSIGNED_RELEASE } = unsignedLua;
    const bucket = `${prefix}:u:7`;
    const [t1, t2, t3, t4, t5] = [newToken(), newToken(), newToken(), newToken(), newToken()];
    expect(await run(UNSIGNED_CLAIM, [bucket], ['ns:u:a', t1, 60_000, 2])).toBe(0);
    expect(await admin.hlen(bucket)).toBe(1);
    expect(await admin.hget(bucket, sha1('ns:u:a'))).toMatch(new RegExp(`^lock:${t1}:\\d+$`));
    expect(await run(UNSIGNED_CLAIM, [bucket], ['ns:u:a', t2, 60_000, 2])).toBeGreaterThan(0);
    expect(await run(UNSIGNED_EXTEND, [bucket], ['ns:u:a', t2, 60_000])).toBe(0);
    expect(await run(UNSIGNED_EXTEND, [bucket], ['ns:u:a', t1, 60_000])).toBe(1);
    expect(await run(UNSIGNED_COMPLETE, [bucket], ['ns:u:a', t1, 60_000])).toBe(1);
    expect(await run(UNSIGNED_COMPLETE, [bucket], ['ns:u:a', t1, 60_000])).toBe(1);
    expect(await run(UNSIGNED_CLAIM, [bucket], ['ns:u:a', t2, 60_000, 2])).toBe(-1);
    expect(await run(UNSIGNED_CLAIM, [bucket], ['ns:u:b', t3, 60_000, 2])).toBe(0);
    // Full: the completion of `a` is forgotten to make room for `c`.
    expect(await run(UNSIGNED_CLAIM, [bucket], ['ns:u:c', t4, 60_000, 2])).toBe(0);
    expect(await admin.hexists(bucket, sha1('ns:u:a'))).toBe(0);
    // Full of live claims: refused.
    expect(await run(UNSIGNED_CLAIM, [bucket], ['ns:u:d', t5, 60_000, 2])).toBe(-3);
    expect(await run(UNSIGNED_RELEASE, [bucket], ['ns:u:b', t4])).toBe(0);
    expect(await run(UNSIGNED_RELEASE, [bucket], ['ns:u:b', t3])).toBe(1);
    expect(await admin.hlen(bucket)).toBe(1);
    expect(await admin.pttl(bucket)).toBeGreaterThan(0);
  });

  it('ordering: the entity\'s lock, version, stale and busy verdicts, and forgetting the version', async () => {
    const { ENTITY_CLAIM, ENTITY_COMPLETE, ENTITY_EXTEND, ENTITY_RELEASE, FORGET_VERSION } = orderingLua;
    const tagged = `${prefix}{order-1}`;
    const keys = [`${tagged}ns:s:one`, tagged, `${tagged}:lock`];
    const [owner, other, late] = [newToken(), newToken(), newToken()];
    expect(await run(ENTITY_CLAIM, keys, [owner, 60_000, 'v0002', '1'])).toEqual([0, 0]);
    expect(await admin.get(`${tagged}:lock`)).toBe(owner);
    const [busy, busyMs] = (await run(ENTITY_CLAIM, keys, [other, 60_000, 'v0003', '1'])) as [number, number];
    expect(busy).toBe(4);
    expect(busyMs).toBeGreaterThan(0);
    expect(await run(ENTITY_CLAIM, keys, [other, 60_000, 'v0003', '0'])).toEqual([0, 0]);
    expect(await run(ENTITY_EXTEND, keys, [other, 90_000])).toBe(0);
    expect(await run(ENTITY_EXTEND, keys, [owner, 90_000])).toBe(1);
    expect(await admin.pttl(`${tagged}:lock`)).toBeGreaterThan(60_000);
    expect(await run(ENTITY_COMPLETE, keys, [owner, 60_000, 'v0002'])).toBe(1);
    expect(await admin.get(tagged)).toBe('v0002');
    expect(await admin.exists(`${tagged}:lock`)).toBe(0);
    // Never lowered.
    expect(await run(ENTITY_COMPLETE, keys, [other, 60_000, 'v0001'])).toBe(1);
    expect(await admin.get(tagged)).toBe('v0002');
    expect(await run(ENTITY_CLAIM, keys, [late, 60_000, 'v0001', '1'])).toEqual([3, 0]);
    expect(await run(ENTITY_CLAIM, keys, [late, 60_000, 'v0003', '1'])).toEqual([0, 0]);
    expect(await run(ENTITY_RELEASE, keys, [late])).toBe(1);
    expect(await admin.exists(`${tagged}:lock`)).toBe(0);
    // An id kept under the entity's tag (where earlier releases kept ordered ids).
    await admin.set(keys[0]!, `done:${owner}`, 'PX', 30_000);
    const [done, doneMs] = (await run(ENTITY_CLAIM, keys, [late, 60_000, 'v0003', '1'])) as [number, number];
    expect([done, doneMs > 0]).toEqual([1, true]);
    await admin.set(keys[0]!, `lock:${owner}`, 'PX', 30_000);
    const [held, heldMs] = (await run(ENTITY_CLAIM, keys, [late, 60_000, 'v0003', '1'])) as [number, number];
    expect([held, heldMs > 0]).toEqual([2, true]);
    expect(await run(FORGET_VERSION, [tagged], [])).toBe(1);
    expect(await admin.exists(tagged)).toBe(0);
  });
});
