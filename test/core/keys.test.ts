/**
 * Tenant keys: each tenant verified with its own keys, the cache (single flight, TTL,
 * forget, the unknown-tenant bound), the loader's failures (slow, throwing with and without
 * earlier keys, an invalid key) and the flood of random tenant names.
 */

import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { webCryptoBackend } from '../../src/crypto.ts';
import { WebhookError } from '../../src/errors.ts';
import { TENANT_KEYS_DEFAULTS, tenantKeys, tenantKeysWith, type TenantKeysLoaded, type TenantKeysOptions, type TenantRequest } from '../../src/keys.ts';
import { generateKeyPair, signWebhook } from '../../src/sign.ts';
import type { WebhookInput } from '../../src/verify.ts';
import { expectNoSecretInMessages, newSecret, recordMessage, recordedMessageCount, rejection, thrown, track } from './support.ts';

const T = 1_700_000_000;

afterAll(() => {
  expect(recordedMessageCount()).toBeGreaterThan(10);
  expectNoSecretInMessages();
});

/** A loader over a table the test edits, counting its calls per tenant. */
function table(rows: Record<string, TenantKeysLoaded>) {
  const calls: string[] = [];
  const load = async (tenant: string): Promise<TenantKeysLoaded> => {
    calls.push(tenant);
    return rows[tenant];
  };
  return { rows, calls, load, count: (tenant: string) => calls.filter((name) => name === tenant).length };
}

/** A clock the test moves, in epoch milliseconds. */
function clock(start = T * 1000) {
  let time = start;
  return { now: () => time, advance: (ms: number) => void (time += ms) };
}

const byParam = (request: TenantRequest) => request.params.tenant;

async function signed(secret: string, tenant: string, id = 'msg_1', at = T): Promise<WebhookInput> {
  const { headers } = await signWebhook({ secret, body: `{"tenant":${JSON.stringify(tenant)}}`, id, timestamp: at });
  return { headers, body: `{"tenant":${JSON.stringify(tenant)}}`, params: { tenant } };
}

const randomName = () => randomBytes(12).toString('base64url');

/** What a verification came to: `'verified'` or the error's code. */
const codeOf = (outcome: Promise<unknown>): Promise<string> =>
  outcome.then(
    () => 'verified',
    (error: WebhookError) => error.code,
  );

/** A promise the test settles when it chooses (a load in flight). */
function gate<T>() {
  let open!: (value: T) => void;
  let fail!: (error: unknown) => void;
  const promise = new Promise<T>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

describe('tenant keys', () => {
  it('verifies each tenant with its own keys only, and says which tenant and key', async () => {
    const acme = newSecret();
    const globex = newSecret();
    const db = table({ acme: [{ key: acme, keyId: 'acme-1' }], globex: { secrets: globex } });
    const t = clock();
    const verifier = tenantKeys({ tenant: byParam, load: db.load, now: t.now }).verifier({ now: t.now });

    const webhook = await verifier.verify(await signed(acme, 'acme'));
    expect({ tenant: webhook.tenant, keyId: webhook.keyId, keyIndex: webhook.keyIndex, signed: webhook.signed }).toEqual({
      tenant: 'acme',
      keyId: 'acme-1',
      keyIndex: 0,
      signed: true,
    });
    expect((await verifier.verify(await signed(globex, 'globex'))).tenant).toBe('globex');
    // acme's secret on globex's route, and the other way round.
    await rejection(verifier.verify({ ...(await signed(acme, 'acme')), params: { tenant: 'globex' } }), 'SIGNATURE_MISMATCH');
    await rejection(verifier.verify({ ...(await signed(globex, 'globex')), params: { tenant: 'acme' } }), 'SIGNATURE_MISMATCH');
  });

  it('takes every SecretInput a loader may return: a rotation pair, a comma-separated string, whpk_ keys', async () => {
    const [old, current] = [newSecret(), newSecret()];
    const pair = await generateKeyPair();
    track(pair.secretKey);
    const db = table({ rotating: `${current},${old}`, signer: [pair.publicKey] });
    const t = clock();
    const verifier = tenantKeys({ tenant: byParam, load: db.load, now: t.now }).verifier({ now: t.now });
    expect((await verifier.verify(await signed(old, 'rotating'))).keyIndex).toBe(1);
    expect((await verifier.verify(await signed(current, 'rotating'))).keyIndex).toBe(0);
    const v1a = await verifier.verify(await signed(pair.secretKey, 'signer'));
    expect({ scheme: v1a.scheme, tenant: v1a.tenant }).toEqual({ scheme: 'v1a', tenant: 'signer' });
  });

  it('loads a tenant once for many requests, and once for many concurrent first requests (single flight)', async () => {
    const secret = newSecret();
    const load = gate<TenantKeysLoaded>();
    let calls = 0;
    const t = clock();
    const keys = tenantKeys({ tenant: byParam, load: () => (calls++, load.promise), now: t.now });
    const verifier = keys.verifier({ now: t.now });
    const input = await signed(secret, 'acme');
    const waiting = Array.from({ length: 50 }, () => verifier.verify(input));
    expect(keys.usage().loading).toBe(1);
    load.open([secret]);
    const results = await Promise.all(waiting);
    expect(results.every((webhook) => webhook.tenant === 'acme')).toBe(true);
    for (let i = 0; i < 20; i++) await verifier.verify(input);
    expect(calls).toBe(1);
    expect(keys.usage()).toEqual({ tenants: 1, unknownTenants: 0, loading: 0, abandoned: 0 });
  });

  it('loads again after the TTL, so a rotation takes effect then; forget takes effect at once', async () => {
    const [first, second, third] = [newSecret(), newSecret(), newSecret()];
    const db = table({ acme: [first] });
    const t = clock();
    const keys = tenantKeys({ tenant: byParam, load: db.load, ttlSeconds: 60, now: t.now });
    const verifier = keys.verifier({ now: t.now });
    await verifier.verify(await signed(first, 'acme'));

    db.rows.acme = [second, first]; // rotated in the database
    t.advance(60_000); // the TTL ends after 60 s, not at 60 s
    await rejection(verifier.verify(await signed(second, 'acme')), 'SIGNATURE_MISMATCH');
    expect(db.count('acme')).toBe(1);
    t.advance(1);
    expect((await verifier.verify(await signed(second, 'acme'))).keyIndex).toBe(0);
    expect(db.count('acme')).toBe(2);

    db.rows.acme = [third]; // the old keys revoked
    await verifier.verify(await signed(first, 'acme'));
    keys.forget('acme');
    await rejection(verifier.verify(await signed(first, 'acme')), 'SIGNATURE_MISMATCH');
    expect((await verifier.verify(await signed(third, 'acme'))).tenant).toBe('acme');
    expect(db.count('acme')).toBe(3);
  });

  it('a load in flight when its tenant is forgotten serves its waiters but is not cached', async () => {
    const [before, after] = [newSecret(), newSecret()];
    const loads = [gate<TenantKeysLoaded>(), gate<TenantKeysLoaded>()];
    let calls = 0;
    const t = clock();
    const keys = tenantKeys({ tenant: byParam, load: () => loads[calls++]!.promise, now: t.now });
    const verifier = keys.verifier({ now: t.now });
    const early = verifier.verify(await signed(before, 'acme'));
    keys.forget('acme');
    const late = verifier.verify(await signed(after, 'acme'));
    expect(calls).toBe(2);
    loads[0]!.open([before]);
    loads[1]!.open([after]);
    expect((await early).tenant).toBe('acme');
    expect((await late).tenant).toBe('acme');
    await rejection(verifier.verify(await signed(before, 'acme')), 'SIGNATURE_MISMATCH');
    expect(calls).toBe(2);
  });

  describe('unknown tenants', () => {
    it('answers 404 UNKNOWN_TENANT, remembered for unknownTtlSeconds, so a new tenant is known within that time', async () => {
      const secret = newSecret();
      const db = table({});
      const t = clock();
      const keys = tenantKeys({ tenant: byParam, load: db.load, unknownTtlSeconds: 10, now: t.now });
      const verifier = keys.verifier({ now: t.now });
      const input = await signed(secret, 'newco');
      const error = await rejection(verifier.verify(input), 'UNKNOWN_TENANT');
      expect(error.message).toBe('tenant "newco" is unknown');
      db.rows.newco = [secret]; // signed up
      await rejection(verifier.verify(input), 'UNKNOWN_TENANT');
      expect(db.count('newco')).toBe(1);
      t.advance(10_001);
      expect((await verifier.verify(input)).tenant).toBe('newco');
      expect(db.count('newco')).toBe(2);
    });

    it('forget makes an unknown tenant known at once; null is unknown as undefined is', async () => {
      const secret = newSecret();
      const db = table({ gone: null });
      const t = clock();
      const keys = tenantKeys({ tenant: byParam, load: db.load, now: t.now });
      const verifier = keys.verifier({ now: t.now });
      await rejection(verifier.verify(await signed(secret, 'gone')), 'UNKNOWN_TENANT');
      db.rows.gone = [secret];
      keys.forget('gone');
      expect((await verifier.verify(await signed(secret, 'gone'))).tenant).toBe('gone');
    });

    it('a request naming no tenant, or one too long, is 404 without a load; a tenant function returning a number is a TypeError', async () => {
      const secret = newSecret();
      const db = table({});
      const verifier = tenantKeys({ tenant: byParam, load: db.load }).verifier();
      const input = await signed(secret, 'x');
      for (const params of [{}, { tenant: '' }]) await rejection(verifier.verify({ ...input, params }), 'UNKNOWN_TENANT');
      const long = 'a'.repeat(TENANT_KEYS_DEFAULTS.maxTenantLength + 1);
      const error = await rejection(verifier.verify({ ...input, params: { tenant: long } }), 'UNKNOWN_TENANT');
      expect(error.message).toBe(`the tenant named is 257 characters long; the limit is 256`);
      expect(db.calls).toEqual([]);
      const numbered = tenantKeys({ tenant: () => 7 as unknown as string, load: db.load }).verifier();
      await expect(numbered.verify(input)).rejects.toThrow(new TypeError("the tenant function returned a number; it must return the tenant's name (a string) or undefined"));
    });

    it('keeps unknown names in a bound of their own: they never push a known tenant out', async () => {
      const secret = newSecret();
      const db = table({ acme: [secret] });
      const t = clock();
      const keys = tenantKeys({ tenant: byParam, load: db.load, maxTenants: 1, maxUnknownTenants: 3, now: t.now });
      const verifier = keys.verifier({ now: t.now });
      await verifier.verify(await signed(secret, 'acme'));
      for (let i = 0; i < 20; i++) await rejection(verifier.verify(await signed(secret, `nobody-${i}`)), 'UNKNOWN_TENANT');
      expect(keys.usage()).toEqual({ tenants: 1, unknownTenants: 3, loading: 0, abandoned: 0 });
      await verifier.verify(await signed(secret, 'acme'));
      expect(db.count('acme')).toBe(1);
    });
  });

  describe("the loader's failures", () => {
    it('a slow loader times out: 503 KEYS_UNAVAILABLE, its signal aborted, its slot freed', async () => {
      const secret = newSecret();
      const aborted = gate<unknown>();
      const keys = tenantKeys({
        tenant: byParam,
        loadTimeoutMs: 50,
        load: (_tenant, { signal }) => {
          signal.addEventListener('abort', () => aborted.open(signal.reason));
          return new Promise<TenantKeysLoaded>(() => {});
        },
      });
      const started = performance.now();
      const error = await rejection(keys.verifier().verify(await signed(secret, 'acme')), 'KEYS_UNAVAILABLE');
      expect(performance.now() - started).toBeGreaterThanOrEqual(45);
      expect(error.message).toBe('the key loader did not answer for tenant "acme" within 50 ms (loadTimeoutMs)');
      expect(await aborted.promise).toBe(error);
      expect(keys.usage().loading).toBe(0);
    });

    it('a throwing loader without earlier keys: 503 KEYS_UNAVAILABLE with the error as cause, not cached', async () => {
      const secret = newSecret();
      let calls = 0;
      const failure = new Error('connection refused');
      const keys = tenantKeys({
        tenant: byParam,
        load: () => {
          calls++;
          throw failure;
        },
      });
      const verifier = keys.verifier();
      const error = await rejection(verifier.verify(await signed(secret, 'acme')), 'KEYS_UNAVAILABLE');
      expect(error.message).toBe('the key loader failed for tenant "acme"; retry later');
      expect(error.cause).toBe(failure);
      await rejection(verifier.verify(await signed(secret, 'acme')), 'KEYS_UNAVAILABLE');
      expect(calls).toBe(2);
      expect(keys.usage()).toEqual({ tenants: 0, unknownTenants: 0, loading: 0, abandoned: 0 });
    });

    it('a throwing loader with earlier keys: they serve through the grace period, a reload is tried every retryAfterSeconds, then 503', async () => {
      const secret = newSecret();
      let failing = false;
      let calls = 0;
      const t = clock();
      const keys = tenantKeys({
        tenant: byParam,
        ttlSeconds: 60,
        graceSeconds: 300,
        now: t.now,
        load: async () => {
          calls++;
          if (failing) throw new Error('database down');
          return [secret];
        },
      });
      const verifier = keys.verifier({ now: t.now });
      const at = () => Math.floor(t.now() / 1000);
      await verifier.verify(await signed(secret, 'acme'));
      failing = true;
      t.advance(60_001);
      expect((await verifier.verify(await signed(secret, 'acme', 'msg_2', at()))).tenant).toBe('acme');
      expect(calls).toBe(2);
      // Within retryAfterSeconds of the failed reload: served without a load.
      t.advance(TENANT_KEYS_DEFAULTS.retryAfterSeconds * 1000 - 1);
      await verifier.verify(await signed(secret, 'acme', 'msg_3', at()));
      expect(calls).toBe(2);
      t.advance(1);
      await verifier.verify(await signed(secret, 'acme', 'msg_4', at()));
      expect(calls).toBe(3);
      // The grace ends 300 s past the TTL: the keys are dropped and the failure answered; the
      // tenant stays known (its refreshes keep the share of loads kept for known tenants).
      t.advance(300_000 - 1 - TENANT_KEYS_DEFAULTS.retryAfterSeconds * 1000);
      await verifier.verify(await signed(secret, 'acme', 'msg_5', at()));
      expect(calls).toBe(4);
      t.advance(1);
      await rejection(verifier.verify(await signed(secret, 'acme', 'msg_6', at())), 'KEYS_UNAVAILABLE');
      expect(keys.usage().tenants).toBe(1);
      failing = false;
      expect((await verifier.verify(await signed(secret, 'acme', 'msg_7', at()))).tenant).toBe('acme');
    });

    it('graceSeconds 0: a failed reload is answered at once', async () => {
      const secret = newSecret();
      let failing = false;
      const t = clock();
      const keys = tenantKeys({
        tenant: byParam,
        graceSeconds: 0,
        now: t.now,
        load: async () => {
          if (failing) throw new Error('database down');
          return [secret];
        },
      });
      const verifier = keys.verifier({ now: t.now });
      await verifier.verify(await signed(secret, 'acme'));
      failing = true;
      t.advance(TENANT_KEYS_DEFAULTS.ttlSeconds * 1000 + 1);
      await rejection(verifier.verify(await signed(secret, 'acme', 'msg_2', Math.floor(t.now() / 1000))), 'KEYS_UNAVAILABLE');
    });

    it('an invalid key: 500 INVALID_TENANT_KEYS, its hint naming the tenant and the position, never the key; not cached; earlier keys not served', async () => {
      const good = newSecret();
      const bad = track('whsec_this is not base64!!');
      const db = table({ acme: [good] });
      const t = clock();
      const keys = tenantKeys({ tenant: byParam, load: db.load, now: t.now });
      const verifier = keys.verifier({ now: t.now });
      await verifier.verify(await signed(good, 'acme'));
      db.rows.acme = [good, { key: bad, keyId: 'k2' }];
      keys.forget('acme');
      const error = await rejection(verifier.verify(await signed(good, 'acme')), 'INVALID_TENANT_KEYS');
      expect(error.status).toBe(500);
      // The answer's message says nothing of the tenant or the key; the log's hint says which and why.
      expect(error.message).toBe("the receiving server's keys for this endpoint are misconfigured; the delivery itself was not judged");
      expect(error.hint).toBe(
        `the keys loaded for tenant "acme" do not decode: keys[1] (keyId "k2") contains whitespace (often a trailing newline from a file or an environment variable); trim it`,
      );
      expect(error.cause).toBeInstanceOf(TypeError);
      await rejection(verifier.verify(await signed(good, 'acme')), 'INVALID_TENANT_KEYS');
      expect(db.count('acme')).toBe(3);
      for (const loaded of [[], { secrets: [] }, [track('whsk_' + randomBytes(64).toString('base64'))]] as TenantKeysLoaded[]) {
        db.rows.acme = loaded;
        await rejection(verifier.verify(await signed(good, 'acme')), 'INVALID_TENANT_KEYS');
      }
      // Known still (the loader knows acme), without keys to serve.
      expect(keys.usage().tenants).toBe(1);
      expect(db.count('acme')).toBe(6);
    });
  });

  describe('a flood of random tenant names', () => {
    it('10 000 requests naming 10 000 random tenants: loads in three quarters of maxConcurrentLoads, bounded caches, refusals without a wait', async () => {
      const secret = newSecret();
      const t = clock();
      const known = gate<TenantKeysLoaded>();
      const loads: { tenant: string; answer: ReturnType<typeof gate<TenantKeysLoaded>> }[] = [];
      const keys = tenantKeys({
        tenant: byParam,
        now: t.now,
        load: (tenant) => {
          if (tenant === 'acme') return known.promise;
          const answer = gate<TenantKeysLoaded>();
          loads.push({ tenant, answer });
          return answer.promise;
        },
      });
      const verifier = keys.verifier({ now: t.now });
      known.open([secret]);
      await verifier.verify(await signed(secret, 'acme'));

      const input = await signed(secret, 'x');
      const started = performance.now();
      const outcomes = Array.from({ length: 10_000 }, () =>
        verifier.verify({ ...input, params: { tenant: randomBytes(12).toString('base64url') } }).then(
          () => 'verified',
          (error: WebhookError) => error.code,
        ),
      );
      // The last quarter of the slots is kept for tenants loaded before: 12 of the default 16.
      const admitted = TENANT_KEYS_DEFAULTS.maxConcurrentLoads * 0.75;
      expect(loads.length).toBe(admitted);
      expect(keys.usage().loading).toBe(admitted);
      // The first requests started the loads; every later one settles while those are all pending.
      const settled = await Promise.all(outcomes.slice(admitted));
      const refusedIn = performance.now() - started;
      expect(new Set(settled)).toEqual(new Set(['KEYS_UNAVAILABLE']));
      expect(loads.every((load) => load.tenant.length === 16)).toBe(true);

      for (const { answer } of loads) answer.open(undefined);
      const all = await Promise.all(outcomes);
      expect(all.filter((code) => code === 'UNKNOWN_TENANT').length).toBe(admitted);
      expect(all.filter((code) => code === 'KEYS_UNAVAILABLE').length).toBe(10_000 - admitted);
      expect(keys.usage()).toEqual({ tenants: 1, unknownTenants: admitted, loading: 0, abandoned: 0 });
      // The known tenant was not pushed out, nor loaded again.
      expect((await verifier.verify(await signed(secret, 'acme', 'msg_2'))).tenant).toBe('acme');
      recordMessage(`flood refused in ${refusedIn.toFixed(0)} ms`);
    });

    it('a flood in waves of 100 whose loads answer at once: one load per admitted name, the unknown cache at its bound', async () => {
      const secret = newSecret();
      let calls = 0;
      const keys = tenantKeys({ tenant: byParam, maxUnknownTenants: 500, load: async () => void calls++ });
      const verifier = keys.verifier({ now: () => T * 1000 });
      const input = await signed(secret, 'x');
      const codes = new Map<string, number>();
      for (let wave = 0; wave < 100; wave++) {
        const settled = await Promise.all(
          Array.from({ length: 100 }, () =>
            verifier.verify({ ...input, params: { tenant: randomBytes(12).toString('base64url') } }).catch((error: WebhookError) => error.code),
          ),
        );
        for (const code of settled) codes.set(String(code), (codes.get(String(code)) ?? 0) + 1);
        expect(keys.usage().unknownTenants).toBeLessThanOrEqual(500);
      }
      expect(calls).toBe(100 * TENANT_KEYS_DEFAULTS.maxConcurrentLoads * 0.75);
      expect(Object.fromEntries(codes)).toEqual({ UNKNOWN_TENANT: calls, KEYS_UNAVAILABLE: 10_000 - calls });
      expect(keys.usage()).toEqual({ tenants: 0, unknownTenants: 500, loading: 0, abandoned: 0 });
    });

    it('at the load limit a tenant past its TTL is served its earlier keys rather than refused', async () => {
      const secret = newSecret();
      const t = clock();
      const held: ReturnType<typeof gate<TenantKeysLoaded>>[] = [];
      let first = true;
      const keys = tenantKeys({
        tenant: byParam,
        maxConcurrentLoads: 1,
        now: t.now,
        load: (tenant) => {
          if (tenant === 'acme' && first) {
            first = false;
            return [secret];
          }
          const answer = gate<TenantKeysLoaded>();
          held.push(answer);
          return answer.promise;
        },
      });
      const verifier = keys.verifier({ now: t.now });
      await verifier.verify(await signed(secret, 'acme'));
      t.advance(TENANT_KEYS_DEFAULTS.ttlSeconds * 1000 + 1);
      const other = verifier.verify(await signed(secret, 'other', 'msg_1', Math.floor(t.now() / 1000)));
      expect(keys.usage().loading).toBe(1);
      expect((await verifier.verify(await signed(secret, 'acme', 'msg_2', Math.floor(t.now() / 1000)))).tenant).toBe('acme');
      held[0]!.open(undefined);
      await rejection(other, 'UNKNOWN_TENANT');
    });
  });

  describe('known tenants under a flood of unknown names', () => {
    /** A loader answering known tenants from `rows` (or holding, or failing them) and holding every other name until released. */
    function floodable(rows: Record<string, string>) {
      const held: ReturnType<typeof gate<TenantKeysLoaded>>[] = [];
      const mode: Record<string, 'answer' | 'hold' | 'fail'> = {};
      const heldKnown: ReturnType<typeof gate<TenantKeysLoaded>>[] = [];
      const calls: string[] = [];
      const load = (tenant: string): Promise<TenantKeysLoaded> => {
        calls.push(tenant);
        const secret = rows[tenant];
        if (secret === undefined) {
          const answer = gate<TenantKeysLoaded>();
          held.push(answer);
          return answer.promise;
        }
        if (mode[tenant] === 'fail') return Promise.reject(new Error('database down'));
        if (mode[tenant] === 'hold') {
          const answer = gate<TenantKeysLoaded>();
          heldKnown.push(answer);
          return answer.promise;
        }
        return Promise.resolve([secret]);
      };
      return { held, heldKnown, mode, calls, load, count: (tenant: string) => calls.filter((name) => name === tenant).length };
    }
    it('64 made-up names at once hold three quarters of the slots; a known tenant past its TTL and grace is refreshed in the quarter kept, not refused', async () => {
      const [acme, globex, newco] = [newSecret(), newSecret(), newSecret()];
      const t = clock();
      const db = floodable({ acme, globex, newco });
      const keys = tenantKeys({ tenant: byParam, now: t.now, ttlSeconds: 60, graceSeconds: 300, load: db.load });
      const verifier = keys.verifier({ now: t.now });
      const at = () => Math.floor(t.now() / 1000);
      await verifier.verify(await signed(acme, 'acme'));
      await verifier.verify(await signed(globex, 'globex'));

      const input = await signed(acme, 'x');
      const flood = Array.from({ length: 64 }, () => codeOf(verifier.verify({ ...input, params: { tenant: randomName() } })));
      const { maxConcurrentLoads } = TENANT_KEYS_DEFAULTS;
      expect(db.held.length).toBe(maxConcurrentLoads * 0.75);
      expect(await Promise.all(flood.slice(db.held.length))).toEqual(Array(64 - db.held.length).fill('KEYS_UNAVAILABLE'));
      const refused = await rejection(verifier.verify({ ...input, params: { tenant: 'made-up' } }), 'KEYS_UNAVAILABLE');
      expect(refused.message).toBe('tenant "made-up" was not loaded: 12 of 16 key load slots are taken (maxConcurrentLoads, the last 4 kept for tenants loaded before); retry later');
      recordMessage(refused.message);

      // Past the TTL and the grace: the keys no longer serve, a refresh is needed, and it runs.
      t.advance((60 + 300) * 1000 + 1);
      expect((await verifier.verify(await signed(acme, 'acme', 'msg_2', at()))).tenant).toBe('acme');
      expect(db.count('acme')).toBe(2);
      // Forgotten keys keep the tenant known: its reload runs in the quarter kept too.
      keys.forget('globex');
      expect((await verifier.verify(await signed(globex, 'globex', 'msg_3', at()))).tenant).toBe('globex');
      expect(db.count('globex')).toBe(2);
      // A tenant never loaded in this process is a name like any other until its first load.
      await rejection(verifier.verify(await signed(newco, 'newco', 'msg_4', at())), 'KEYS_UNAVAILABLE');
      expect(db.count('newco')).toBe(0);
      expect(keys.usage()).toEqual({ tenants: 2, unknownTenants: 0, loading: 12, abandoned: 0 });

      for (const answer of db.held) answer.open(undefined);
      expect((await Promise.all(flood)).filter((code) => code === 'UNKNOWN_TENANT').length).toBe(12);
      expect((await verifier.verify(await signed(newco, 'newco', 'msg_5', at()))).tenant).toBe('newco');
    });

    it('a refresh refused or failing serves the last good keys within graceSeconds; past it 503, and the tenant stays known for its next refresh', async () => {
      const [acme, globex] = [newSecret(), newSecret()];
      const t = clock();
      const db = floodable({ acme, globex });
      // 4 slots: 3 for any name, the 4th kept for tenants loaded before.
      const keys = tenantKeys({ tenant: byParam, now: t.now, ttlSeconds: 60, graceSeconds: 300, maxConcurrentLoads: 4, load: db.load });
      const verifier = keys.verifier({ now: t.now });
      const at = () => Math.floor(t.now() / 1000);
      await verifier.verify(await signed(acme, 'acme'));
      await verifier.verify(await signed(globex, 'globex'));
      const input = await signed(acme, 'x');
      const flood = Array.from({ length: 10 }, () => codeOf(verifier.verify({ ...input, params: { tenant: randomName() } })));
      expect(db.held.length).toBe(3);

      // globex's refresh takes the kept slot and hangs there: acme's refresh is refused.
      t.advance(60_001);
      db.mode.globex = 'hold';
      const globexWaits = verifier.verify(await signed(globex, 'globex', 'msg_g', at()));
      expect(keys.usage().loading).toBe(4);
      expect((await verifier.verify(await signed(acme, 'acme', 'msg_2', at()))).tenant).toBe('acme');
      expect(db.count('acme')).toBe(1);
      // Past the grace a refused refresh is answered: the keys are not trusted any longer.
      t.advance(300_000);
      const refused = await rejection(verifier.verify(await signed(acme, 'acme', 'msg_3', at())), 'KEYS_UNAVAILABLE');
      expect(refused.message).toBe('tenant "acme" was not loaded: 4 of 4 key load slots are taken (maxConcurrentLoads, the last 1 kept for tenants loaded before); retry later');
      expect(keys.usage().tenants).toBe(2);

      // The kept slot frees; acme's refresh now fails: past the grace, answered, still known.
      db.heldKnown[0]!.open([globex]);
      expect((await globexWaits).tenant).toBe('globex');
      db.mode.acme = 'fail';
      const failed = await rejection(verifier.verify(await signed(acme, 'acme', 'msg_4', at())), 'KEYS_UNAVAILABLE');
      expect(failed.message).toBe('the key loader failed for tenant "acme"; retry later');
      expect(db.count('acme')).toBe(2);
      expect(keys.usage()).toMatchObject({ tenants: 2, loading: 3 });
      // Its next refresh, the made-up names still holding their three slots, succeeds.
      db.mode.acme = 'answer';
      expect((await verifier.verify(await signed(acme, 'acme', 'msg_5', at()))).tenant).toBe('acme');
      expect(db.count('acme')).toBe(3);

      // A failing refresh within the grace serves the last good keys (acme, loaded just now).
      t.advance(60_001);
      db.mode.acme = 'fail';
      expect((await verifier.verify(await signed(acme, 'acme', 'msg_6', at()))).tenant).toBe('acme');
      expect(db.count('acme')).toBe(4);
      for (const answer of db.held) answer.open(undefined);
      await Promise.all(flood);
    });

    it('keys forgotten while their reload runs do not serve when that reload fails', async () => {
      const secret = newSecret();
      const t = clock();
      const db = floodable({ acme: secret });
      const keys = tenantKeys({ tenant: byParam, now: t.now, load: db.load });
      const verifier = keys.verifier({ now: t.now });
      await verifier.verify(await signed(secret, 'acme'));
      t.advance(TENANT_KEYS_DEFAULTS.ttlSeconds * 1000 + 1);
      db.mode.acme = 'hold';
      const waiting = verifier.verify(await signed(secret, 'acme', 'msg_2', Math.floor(t.now() / 1000)));
      keys.forget('acme'); // the key was revoked
      db.heldKnown[0]!.fail(new Error('database down'));
      await rejection(waiting, 'KEYS_UNAVAILABLE');
    });
  });

  describe('a loader that does not stop when its signal aborts', () => {
    it('loads still running past their timeout are capped (maxAbandonedLoads), later ones refused at once, without a loader call', async () => {
      const secret = newSecret();
      const t = clock();
      const hung: ReturnType<typeof gate<TenantKeysLoaded>>[] = [];
      let settled = 0;
      let hang = false;
      const keys = tenantKeys({
        tenant: byParam,
        now: t.now,
        loadTimeoutMs: 20,
        maxConcurrentLoads: 4,
        maxAbandonedLoads: 8,
        // Ignores its signal: the call runs until the test settles it.
        load: () => {
          if (!hang) return [secret];
          const call = gate<TenantKeysLoaded>();
          hung.push(call);
          void call.promise.finally(() => settled++);
          return call.promise;
        },
      });
      const verifier = keys.verifier({ now: t.now });
      const at = () => Math.floor(t.now() / 1000);
      await verifier.verify(await signed(secret, 'acme'));
      hang = true;

      const input = await signed(secret, 'x');
      const running = () => hung.length - settled;
      const codes: string[] = [];
      for (let wave = 0; wave < 12; wave++) {
        codes.push(...(await Promise.all(Array.from({ length: 4 }, () => codeOf(verifier.verify({ ...input, params: { tenant: randomName() } }))))));
        expect(running()).toBeLessThanOrEqual(4 + 8);
      }
      expect(new Set(codes)).toEqual(new Set(['KEYS_UNAVAILABLE']));
      // 8 set aside, then 3 timed-out loads keep their slots (the 4th slot is kept for known tenants).
      expect(hung.length).toBe(11);
      expect(keys.usage()).toMatchObject({ loading: 3, abandoned: 8 });
      const refused = await rejection(verifier.verify({ ...input, params: { tenant: 'made-up' } }), 'KEYS_UNAVAILABLE');
      expect(refused.message).toBe('tenant "made-up" was not loaded: 3 of 4 key load slots are taken (maxConcurrentLoads, the last 1 kept for tenants loaded before); retry later');
      expect(refused.hint).toBe(
        '3 of the loads holding a slot timed out but their loader call still runs, and 8 more are set aside (maxAbandonedLoads 8): the loader does not stop when its signal aborts; ' +
          'pass the signal on to the database or HTTP client, or give that client a timeout shorter than loadTimeoutMs',
      );
      expect(hung.length).toBe(11);

      // A known tenant past its TTL still tries, in the slot kept: it times out, its last good keys serve.
      t.advance(TENANT_KEYS_DEFAULTS.ttlSeconds * 1000 + 1);
      expect((await verifier.verify(await signed(secret, 'acme', 'msg_2', at()))).tenant).toBe('acme');
      expect(hung.length).toBe(12);
      expect(running()).toBe(4 + 8);
      expect(keys.usage()).toMatchObject({ loading: 4, abandoned: 8 });

      // One call set aside settles: the first load waiting for room moves aside and frees its slot.
      hung[0]!.open(undefined);
      await hung[0]!.promise;
      expect(keys.usage()).toMatchObject({ loading: 3, abandoned: 8 });
      // A call holding a slot settles: the slot is free, and a made-up name may load again (and hang).
      hung[10]!.open(undefined);
      await hung[10]!.promise;
      expect(keys.usage()).toMatchObject({ loading: 2, abandoned: 8 });
      await rejection(verifier.verify({ ...input, params: { tenant: randomName() } }), 'KEYS_UNAVAILABLE');
      expect(hung.length).toBe(13);
      expect(running()).toBeLessThanOrEqual(4 + 8);
      for (const call of hung) call.open(undefined);
      await Promise.all(hung.map((call) => call.promise));
      expect(keys.usage()).toMatchObject({ loading: 0, abandoned: 0 });
    });

    it('maxAbandonedLoads 0: a timed-out load whose call runs on keeps its slot; a loader that stops on the signal frees it at once', async () => {
      const secret = newSecret();
      const hung: ReturnType<typeof gate<TenantKeysLoaded>>[] = [];
      const deaf = tenantKeys({
        tenant: byParam,
        loadTimeoutMs: 20,
        maxConcurrentLoads: 1,
        maxAbandonedLoads: 0,
        load: () => {
          const call = gate<TenantKeysLoaded>();
          hung.push(call);
          return call.promise;
        },
      });
      const input = await signed(secret, 'x');
      await rejection(deaf.verifier().verify({ ...input, params: { tenant: 'a' } }), 'KEYS_UNAVAILABLE');
      expect(deaf.usage()).toMatchObject({ loading: 1, abandoned: 0 });
      await rejection(deaf.verifier().verify({ ...input, params: { tenant: 'b' } }), 'KEYS_UNAVAILABLE');
      expect(hung.length).toBe(1);
      hung[0]!.open(undefined);
      await hung[0]!.promise;
      expect(deaf.usage()).toMatchObject({ loading: 0, abandoned: 0 });

      let calls = 0;
      const listening = tenantKeys({
        tenant: byParam,
        loadTimeoutMs: 20,
        maxConcurrentLoads: 1,
        maxAbandonedLoads: 0,
        load: (_tenant, { signal }) => (calls++, new Promise<TenantKeysLoaded>((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)))),
      });
      for (const tenant of ['a', 'b', 'c']) await rejection(listening.verifier().verify({ ...input, params: { tenant } }), 'KEYS_UNAVAILABLE');
      expect(calls).toBe(3);
      expect(listening.usage()).toMatchObject({ loading: 0, abandoned: 0 });
    });
  });

  describe('the request the tenant function sees', () => {
    it('method, path without the query, host, params and headers read lazily, any case, repeats joined', async () => {
      const secret = newSecret();
      const seen: Record<string, unknown>[] = [];
      const keys = tenantKeys({
        tenant: (request) => {
          seen.push({ method: request.method, path: request.path, host: request.host, params: request.params, tenant: request.header('X-Tenant') });
          return request.header('x-tenant')?.split(',')[0];
        },
        load: async () => [secret],
      });
      const verifier = keys.verifier({ now: () => T * 1000 });
      const input = await signed(secret, 'acme');
      await verifier.verify({ ...input, headers: { ...input.headers, 'X-Tenant': ['acme', 'other'] }, path: '/hooks/acme?x=1', host: 'acme.example', method: 'PUT' });
      await verifier.verify({ headers: new Headers({ ...input.headers, 'x-tenant': 'acme' }), body: input.body });
      expect(seen).toEqual([
        { method: 'PUT', path: '/hooks/acme', host: 'acme.example', params: { tenant: 'acme' }, tenant: 'acme, other' },
        { method: 'POST', path: '', host: '', params: {}, tenant: 'acme' },
      ]);
    });

    it('a Fetch Request: path as sent (percent-encoding intact) and host from its URL, no params', async () => {
      const secret = newSecret();
      const keys = tenantKeys({ tenant: (request) => decodeURIComponent(request.path.split('/')[2] ?? ''), load: async (tenant) => (tenant === 'a b' ? [secret] : undefined) });
      const verifier = keys.verifier({ now: () => T * 1000 });
      const input = await signed(secret, 'a b');
      let seen: TenantRequest | undefined;
      const spy = tenantKeys({ tenant: (request) => ((seen = request), undefined), load: async () => undefined }).verifier();
      const request = () => new Request('https://hooks.example:8443/hooks/a%20b?x=1', { method: 'POST', headers: input.headers as Record<string, string>, body: input.body as string });
      expect((await verifier.verifyRequest(request())).tenant).toBe('a b');
      await rejection(spy.verifyRequest(request()), 'UNKNOWN_TENANT');
      expect({ method: seen!.method, path: seen!.path, host: seen!.host, params: seen!.params, id: seen!.header('Webhook-Id') }).toEqual({
        method: 'POST',
        path: '/hooks/a%20b',
        host: 'hooks.example:8443',
        params: {},
        id: 'msg_1',
      });
    });
  });

  it('verifiers with different settings share one load and build their own verifier', async () => {
    const secret = newSecret();
    const db = table({ acme: [secret] });
    const keys = tenantKeys({ tenant: byParam, load: db.load });
    const strict = keys.verifier({ now: () => (T + 10) * 1000, toleranceSeconds: 5 });
    const lenient = keys.verifier({ now: () => (T + 10) * 1000 });
    const input = await signed(secret, 'acme');
    expect((await lenient.verify(input)).tenant).toBe('acme');
    await rejection(strict.verify(input), 'TIMESTAMP_TOO_OLD');
    expect((await lenient.verify(input)).tenant).toBe('acme');
    expect(db.count('acme')).toBe(1);
  });

  it('works on WebCrypto too', async () => {
    const secret = newSecret();
    const verifier = tenantKeysWith({ tenant: byParam, load: async () => [secret] }, webCryptoBackend).verifier({ now: () => T * 1000 });
    expect((await verifier.verify(await signed(secret, 'acme'))).tenant).toBe('acme');
    await rejection(verifier.verify(await signed(newSecret(), 'acme')), 'SIGNATURE_MISMATCH');
  });

  it('checks its options at once', () => {
    const load = async () => undefined;
    const cases: [unknown, typeof TypeError | typeof RangeError, string][] = [
      [undefined, TypeError, 'tenantKeys needs an options object with tenant and load functions'],
      [{ load }, TypeError, 'tenantKeys needs tenant(request): a function naming the tenant of a request (a route parameter, the host, a header)'],
      [{ tenant: byParam }, TypeError, "tenantKeys needs load(tenant): an async function returning the tenant's keys, or undefined for an unknown tenant"],
      [{ tenant: byParam, load, ttlSeconds: 0 }, RangeError, 'tenantKeys ttlSeconds must be a positive finite number (default 60)'],
      [{ tenant: byParam, load, unknownTtlSeconds: Number.NaN }, RangeError, 'tenantKeys unknownTtlSeconds must be a positive finite number (default 10)'],
      [{ tenant: byParam, load, graceSeconds: -1 }, RangeError, 'tenantKeys graceSeconds must be a non-negative finite number (default 300)'],
      [{ tenant: byParam, load, loadTimeoutMs: Infinity }, RangeError, 'tenantKeys loadTimeoutMs must be a positive finite number (default 3000)'],
      [{ tenant: byParam, load, maxConcurrentLoads: 1.5 }, RangeError, 'tenantKeys maxConcurrentLoads must be a positive whole number (default 16)'],
      [{ tenant: byParam, load, maxAbandonedLoads: -1 }, RangeError, 'tenantKeys maxAbandonedLoads must be a non-negative whole number (default 16)'],
      [{ tenant: byParam, load, maxAbandonedLoads: 2.5 }, RangeError, 'tenantKeys maxAbandonedLoads must be a non-negative whole number (default 16)'],
      [{ tenant: byParam, load, maxAbandonedLoads: '4' }, RangeError, 'tenantKeys maxAbandonedLoads must be a non-negative whole number (default 16)'],
      [{ tenant: byParam, load, maxTenants: 0 }, RangeError, 'tenantKeys maxTenants must be a positive whole number (default 10000)'],
      [{ tenant: byParam, load, maxUnknownTenants: -3 }, RangeError, 'tenantKeys maxUnknownTenants must be a positive whole number (default 1000)'],
      [{ tenant: byParam, load, now: 5 }, TypeError, 'tenantKeys now must be a function returning epoch milliseconds'],
    ];
    for (const [options, type, message] of cases) {
      expect(thrown(() => tenantKeys(options as TenantKeysOptions), type).message).toBe(message);
    }
    const keys = tenantKeys({ tenant: byParam, load });
    expect(thrown(() => keys.verifier({ secrets: 'whsec_x' } as object), TypeError).message).toBe('a tenant keys verifier takes its keys from the loader: pass no secrets');
    expect(thrown(() => keys.verifier({ toleranceSeconds: -1 }), RangeError).message).toBe('toleranceSeconds must be a positive, finite number of seconds (default 300)');
    expect(thrown(() => keys.forget(1 as unknown as string), TypeError).message).toBe('forget needs the tenant name (a string)');
  });
});
