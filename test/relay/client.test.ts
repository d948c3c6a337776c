/**
 * The relay client, rule by rule, against the emulator over real HTTP (and, for answers the
 * emulator never gives, a tiny server or a fetch that alters a real answer).
 */

import { inspect } from 'node:util';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { relayClient, type RelayFetch } from '../../src/relay/index.ts';
import { relayEmulator, type RelayEmulator, type RelayEmulatorOptions } from '../../src/testing/index.ts';
import { KEY, OTHER_KEY, expectNoKeyShown, record, recordAll, relayFailure, thrown, tinyServer } from './support.ts';

const V7 = '0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80';

let emulator: RelayEmulator;
const started: RelayEmulator[] = [];

async function start(options: RelayEmulatorOptions = {}): Promise<RelayEmulator> {
  const made = await relayEmulator({ apiKeys: [{ key: KEY }], ...options });
  started.push(made);
  return made;
}

beforeEach(async () => {
  emulator = await start();
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((made) => made.close()));
});

afterAll(() => {
  expectNoKeyShown();
});

const client = (extra: Partial<Parameters<typeof relayClient>[0]> = {}) => relayClient({ baseUrl: emulator.url, apiKey: KEY, ...extra });
const apiRequests = () => emulator.requests.filter((request) => request.path !== '/openapi.json');

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

describe('the API key', () => {
  it('refuses anything but a whk_ key at construction, without quoting it', () => {
    for (const apiKey of ['sk_live_abc', 'Bearer whk_abc', 'whk_', 'whk_has space', `${KEY}\n`, '']) {
      const error = thrown(() => relayClient({ baseUrl: emulator.url, apiKey }));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toMatch(/begins whk_/);
      if (apiKey.length > 4) expect(error.message).not.toContain(apiKey.trim());
    }
    expect(thrown(() => relayClient({ baseUrl: emulator.url, apiKey: 42 as unknown as string }))).toBeInstanceOf(TypeError);
  });

  it('never shows in util.inspect, JSON.stringify, keys or properties of the client', () => {
    const relay = client();
    const views = [inspect(relay, { showHidden: true, depth: 10 }), JSON.stringify(relay), String(Object.keys(relay)), JSON.stringify(Object.getOwnPropertyNames(relay))];
    for (const view of views) {
      record(view);
      expect(view).not.toContain(KEY);
    }
    expect(JSON.parse(JSON.stringify(relay))).toEqual({ baseUrl: emulator.url });
  });

  it('is sent as a bearer key, and a wrong one is a 401 RelayError with the challenge and the request id', async () => {
    expect(await client().whoami()).toEqual({ orgId: emulator.orgId, scopes: expect.arrayContaining(['events:read']) });
    const error = await relayFailure(relayClient({ baseUrl: emulator.url, apiKey: OTHER_KEY }).whoami());
    expect(error).toMatchObject({ status: 401, code: 'UNAUTHORIZED', operation: 'GET /v1/whoami' });
    expect(error.challenge).toMatch(/^Bearer /);
    expect(error.requestId).toMatch(/^req_/);
    expect(error.message).toContain(error.requestId);
    expect(error.message).not.toContain(OTHER_KEY);
  });

  it('is scrubbed from what a server echoes back: envelope, plain text, challenge, request id', async () => {
    const echo = await tinyServer((req, res) => {
      const auth = req.headers.authorization ?? '';
      const key = auth.slice('Bearer '.length);
      if (req.url === '/v1/whoami') {
        res.writeHead(400, { 'content-type': 'application/json', 'x-request-id': `req_${key}` });
        res.end(JSON.stringify({ error: 'VALIDATION_ERROR', message: `bad key ${key} (header: ${auth}); also ${OTHER_KEY}` }));
      } else if (req.url === '/v1/replay-destinations') {
        res.writeHead(500, { 'content-type': 'text/plain', 'x-request-id': 'req_1' });
        res.end(`crash while handling ${auth}`);
      } else {
        res.writeHead(401, { 'www-authenticate': `Bearer realm="x", error="invalid_token", error_description="${key}"`, 'x-request-id': 'req_2' });
        res.end();
      }
    });
    try {
      const relay = relayClient({ baseUrl: echo.url, apiKey: KEY, retryBudgetMs: 0 });
      const invalid = await relayFailure(relay.whoami());
      expect(invalid).toMatchObject({ status: 400, code: 'VALIDATION_ERROR' });
      expect(invalid.message).toContain('bad key whk_[redacted]');
      const crashed = await relayFailure(relay.replayDestinations());
      expect(crashed).toMatchObject({ status: 500, code: 'SERVER_ERROR' });
      expect(crashed.message).toContain('crash while handling Bearer whk_[redacted]');
      const refused = await relayFailure(relay.event(V7));
      expect(refused).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
      for (const error of [invalid, crashed, refused]) {
        const all = [error.message, error.stack, error.challenge, error.requestId, inspect(error), JSON.stringify(error)].join('\n');
        expect(all).not.toContain(KEY);
        expect(all).not.toContain(KEY.slice(4));
        expect(all).not.toContain(OTHER_KEY);
      }
    } finally {
      await echo.close();
    }
  });
});

describe('baseUrl', () => {
  it('takes https, and plain http only on a loopback host', () => {
    for (const baseUrl of ['https://relay.example.com', 'https://relay.example.com/api/', 'http://127.0.0.1:8080', 'http://127.9.8.7', 'http://localhost:3000', 'http://[::1]:3000']) {
      expect(relayClient({ baseUrl, apiKey: KEY }).baseUrl).toBe(baseUrl.replace(/\/$/, ''));
    }
    for (const baseUrl of ['http://relay.example.com', 'http://127.0.0.1.example.com', 'http://10.0.0.1', 'ftp://relay.example.com', 'not a url', 'https://user:pass@relay.example.com', 'https://relay.example.com/?x=1', 'https://relay.example.com/v1']) {
      expect(thrown(() => relayClient({ baseUrl, apiKey: KEY }))).toBeInstanceOf(TypeError);
    }
  });

  it('puts every operation under /v1', async () => {
    const relay = client();
    const event = emulator.addEvent({ body: '{}' });
    await relay.whoami();
    await relay.event(event.id);
    await relay.payload(event.id);
    await relay.replayDestinations();
    await collect(relay.deliveries());
    expect(apiRequests().map((request) => request.path)).toEqual(['/v1/whoami', `/v1/events/${event.id}`, `/v1/events/${event.id}/payload`, '/v1/replay-destinations', '/v1/deliveries']);
  });
});

describe('ids', () => {
  it('refuses anything but a UUID of versions 1-8 (or nil, or max) before any request', async () => {
    const relay = client();
    const bad = ['', 'not-a-uuid', '0190b6a2-4c8e-0d4a-9f3b-2a1c5e6d7f80', '0190b6a2-4c8e-9d4a-9f3b-2a1c5e6d7f80', '0190b6a2-4c8e-7d4a-cf3b-2a1c5e6d7f80', `${V7}/../x`, ` ${V7}`, '0190b6a24c8e7d4a9f3b2a1c5e6d7f80'];
    for (const id of bad) {
      for (const action of [() => relay.event(id), () => relay.payload(id), () => relay.rotateSigningSecret(id), () => relay.waitTrigger(id), () => relay.deliveries({ destinationId: id }), () => relay.deliveries({ subscriptionId: id })]) {
        let error: unknown;
        try {
          await action();
        } catch (caught) {
          error = caught;
        }
        expect(error, id).toBeInstanceOf(TypeError);
        recordAll(error);
      }
    }
    expect(thrown(() => relay.deliveries({ statuses: ['gone' as 'dead'] }))).toBeInstanceOf(TypeError);
    expect(thrown(() => relay.deliveries({ limit: 201 }))).toBeInstanceOf(RangeError);
    await expect(relay.waitTrigger(V7, { maxInlineBytes: 65_537 })).rejects.toBeInstanceOf(RangeError);
    expect(emulator.requests).toEqual([]);
  });

  it('accepts the nil and the max UUID, and upper case', async () => {
    const relay = client();
    for (const id of ['00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', V7.toUpperCase()]) {
      expect((await relayFailure(relay.event(id))).code).toBe('NOT_FOUND');
    }
    expect(emulator.requests).toHaveLength(3);
  });
});

describe('RelayError', () => {
  it('400: the envelope code and message, not retried', async () => {
    // A wire name the emulator does not know: it answers 400 VALIDATION_ERROR.
    const relay = client({ queryNames: { deliveries: { cursor: 'cursor', limit: 'pageSize', destination: 'destinationId', subscription: 'subscriptionId', status: 'status' } } });
    const error = await relayFailure(collect(relay.deliveries({ limit: 5 })));
    expect(error).toMatchObject({ status: 400, code: 'VALIDATION_ERROR', operation: 'GET /v1/deliveries', retryAfter: undefined });
    expect(error.message).toContain('pageSize');
    expect(error.message).toContain(`request id ${error.requestId}`);
    expect(emulator.requests).toHaveLength(1);
  });

  it('403: FORBIDDEN by status, with the challenge', async () => {
    const limited = await start({ apiKeys: [{ key: KEY, scopes: ['events:read'] }] });
    const error = await relayFailure(relayClient({ baseUrl: limited.url, apiKey: KEY }).replayDestinations());
    expect(error).toMatchObject({ status: 403, code: 'FORBIDDEN', operation: 'GET /v1/replay-destinations' });
    expect(error.challenge).toContain('insufficient_scope');
    expect(error.requestId).toMatch(/^req_/);
    expect(limited.requests).toHaveLength(1);
  });

  it('404: NOT_FOUND, not retried', async () => {
    const error = await relayFailure(client().event(V7));
    expect(error).toMatchObject({ status: 404, code: 'NOT_FOUND', operation: 'GET /v1/events/{eventId}' });
    expect(error.requestId).toMatch(/^req_/);
    expect(emulator.requests).toHaveLength(1);
  });

  it('500: SERVER_ERROR from a plain-text body', async () => {
    emulator.failNext(1, { status: 500 });
    const error = await relayFailure(client({ retryBudgetMs: 0 }).whoami());
    expect(error).toMatchObject({ status: 500, code: 'SERVER_ERROR' });
    expect(error.message).toContain('internal error');
    expect(error.requestId).toMatch(/^req_/);
  });

  it('a dropped connection: NETWORK_ERROR with status 0', async () => {
    emulator.failNext(1, { drop: true });
    const error = await relayFailure(client({ retryBudgetMs: 0 }).whoami());
    expect(error).toMatchObject({ status: 0, code: 'NETWORK_ERROR', requestId: undefined });
  });

  it('no answer within timeoutMs: TIMEOUT with status 0', async () => {
    const silent = await tinyServer(() => {
      // Never answers.
    });
    try {
      const error = await relayFailure(relayClient({ baseUrl: silent.url, apiKey: KEY, timeoutMs: 200, retryBudgetMs: 0 }).whoami());
      expect(error).toMatchObject({ status: 0, code: 'TIMEOUT' });
      expect(error.message).toContain('200 ms');
    } finally {
      await silent.close();
    }
  });
});

describe('retries', () => {
  it('waits a 429 Retry-After that fits the budget and tries again', async () => {
    emulator.failNext(1, { status: 429, retryAfter: 1 });
    expect((await client().whoami()).orgId).toBe(emulator.orgId);
    expect(emulator.requests.map((request) => request.status)).toEqual([429, 200]);
  });

  it('throws a 429 whose Retry-After exceeds the budget at once, with retryAfter', async () => {
    emulator.failNext(1, { status: 429, retryAfter: 7200 });
    const error = await relayFailure(client().whoami());
    expect(error).toMatchObject({ status: 429, code: 'RATE_LIMITED', retryAfter: 7200 });
    expect(error.message).toContain('7200 s');
    expect(emulator.requests).toHaveLength(1);
  });

  it('retries a 500 and a dropped connection for reads', async () => {
    emulator.failNext(1, { status: 500 });
    emulator.failNext(1, { drop: true });
    const event = emulator.addEvent({ body: 'x' });
    expect((await client().event(event.id)).id).toBe(event.id);
    expect(emulator.requests.map((request) => request.status)).toEqual([500, 0, 200]);
  });

  it('never retries a rotation after a 500: the relay saw exactly one', async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    emulator.failNext(1, { status: 500 });
    const error = await relayFailure(client().rotateSigningSecret(destination.id));
    expect(error).toMatchObject({ status: 500, code: 'SERVER_ERROR' });
    expect(emulator.requests.filter((request) => request.method === 'POST')).toHaveLength(1);
  });

  it('never retries a rotation after a dropped connection, and says it may have happened', async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    emulator.failNext(1, { drop: true });
    const error = await relayFailure(client().rotateSigningSecret(destination.id));
    expect(error).toMatchObject({ status: 0, code: 'NETWORK_ERROR' });
    expect(error.message).toMatch(/may still have happened.*rotate again/);
    expect(emulator.requests.filter((request) => request.method === 'POST')).toHaveLength(1);
    const rotated = await client().rotateSigningSecret(destination.id);
    expect(rotated).toMatchObject({ destinationId: destination.id, keyId: expect.any(String), signingSecret: expect.stringMatching(/^whsec_/) });
    expect(emulator.signingSecrets(destination.id)[0]).toEqual({ keyId: rotated.keyId, secret: rotated.signingSecret });
  });
});

describe('payload', () => {
  it('keeps a binary body byte for byte', async () => {
    const body = new Uint8Array(512).map((_, i) => (i * 7) % 256);
    const event = emulator.addEvent({ body, contentType: 'application/octet-stream' });
    const payload = await client().payload(event.id);
    expect(payload.contentType).toBe('application/octet-stream');
    expect(payload.body).toEqual(body);
  });

  it('refuses a body whose decoded length is not the declared bytes', async () => {
    const event = emulator.addEvent({ body: 'hello' });
    // The real answer, with `bytes` made to lie.
    const lying: RelayFetch = async (input, init) => {
      const response = await fetch(input, init);
      if (!input.endsWith('/payload')) return response;
      const document = (await response.json()) as { bytes: number };
      return new Response(JSON.stringify({ ...document, bytes: document.bytes + 1 }), { status: 200, headers: response.headers });
    };
    const error = await relayFailure(client({ fetch: lying }).payload(event.id));
    expect(error).toMatchObject({ status: 200, code: 'PAYLOAD_LENGTH_MISMATCH' });
    expect(error.message).toContain('5 bytes');
  });
});

describe('deliveries', () => {
  it('follows nextCursor across pages, with filters, in the relay order', async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    const other = emulator.addDestination({ url: 'https://other.example.com/hooks' }).destination;
    const event = emulator.addEvent({ body: '{}' });
    const wanted = [];
    for (let i = 0; i < 7; i++) {
      emulator.addDelivery({ eventId: event.id, destinationId: other.id, status: 'dead' });
      wanted.push(emulator.addDelivery({ eventId: event.id, destinationId: destination.id, status: i % 2 === 0 ? 'dead' : 'failed', attempt: i }));
      emulator.addDelivery({ eventId: event.id, destinationId: destination.id, status: 'delivered' });
    }
    const got = await collect(client().deliveries({ destinationId: destination.id, statuses: ['dead', 'failed'], limit: 3 }));
    expect(got.map((delivery) => delivery.id)).toEqual(wanted.map((delivery) => delivery.id));
    const pages = apiRequests();
    expect(pages).toHaveLength(3);
    expect(pages[0]!.query).toEqual([
      ['limit', '3'],
      ['destinationId', destination.id],
      ['status', 'dead'],
      ['status', 'failed'],
    ]);
    expect(pages[1]!.query[0]![0]).toBe('cursor');
  });

  it('stops with BAD_RESPONSE when the relay repeats a cursor', async () => {
    const event = emulator.addEvent({ body: '{}' });
    for (let i = 0; i < 3; i++) emulator.addDelivery({ eventId: event.id, destinationId: V7, status: 'dead' });
    const stuck: RelayFetch = async (input, init) => {
      const response = await fetch(input, init);
      if (!input.includes('/v1/deliveries')) return response;
      const page = (await response.json()) as { nextCursor: string | null };
      return new Response(JSON.stringify({ ...page, nextCursor: 'same' }), { status: 200, headers: response.headers });
    };
    const error = await relayFailure(collect(client({ fetch: stuck }).deliveries({ limit: 1 })).catch((e: unknown) => Promise.reject(e)));
    expect(error).toMatchObject({ code: 'BAD_RESPONSE' });
    expect(apiRequests()).toHaveLength(2);
  });
});

describe('query names from openapi.json', () => {
  const spelled = { cursor: 'after', status: 'state', destination: 'destination_id', inlineBodies: 'include_body', maxInlineBytes: 'max_body_bytes' };

  it('uses the names the description gives, read once for concurrent first calls', async () => {
    const relay = await start({ queryNames: spelled });
    const api = relayClient({ baseUrl: relay.url, apiKey: KEY });
    const { destination } = relay.addDestination({ url: 'https://app.example.com/hooks' });
    const event = relay.addEvent({ body: 'hello world' });
    for (let i = 0; i < 3; i++) relay.addDelivery({ eventId: event.id, destinationId: destination.id, status: 'dead' });
    const trigger = relay.addTrigger();
    const [list, batch] = await Promise.all([collect(api.deliveries({ destinationId: destination.id, statuses: ['dead'], limit: 2 })), api.waitTrigger(trigger, { inlineBodies: true, maxInlineBytes: 5 })]);
    expect(list).toHaveLength(3);
    expect(batch.events[0]).toMatchObject({ body: 'hello', bodyTruncated: true });
    expect(relay.requests.filter((request) => request.path === '/openapi.json')).toHaveLength(1);
    const names = relay.requests.filter((request) => request.path !== '/openapi.json').flatMap((request) => request.query.map(([name]) => name));
    expect(new Set(names)).toEqual(new Set(['limit', 'destination_id', 'state', 'after', 'include_body', 'max_body_bytes']));
  });

  it('joins the statuses with commas when the description says explode false', async () => {
    const relay = await start({ queryNames: { statusExplode: false } });
    const event = relay.addEvent({ body: '{}' });
    relay.addDelivery({ eventId: event.id, destinationId: V7, status: 'dead' });
    relay.addDelivery({ eventId: event.id, destinationId: V7, status: 'blocked' });
    relay.addDelivery({ eventId: event.id, destinationId: V7, status: 'failed' });
    const got = await collect(relayClient({ baseUrl: relay.url, apiKey: KEY }).deliveries({ statuses: ['dead', 'failed'] }));
    expect(got.map((delivery) => delivery.status)).toEqual(['dead', 'failed']);
    expect(relay.requests.at(-1)!.query).toEqual([['status', 'dead,failed']]);
  });

  it('keeps the described list style for a status parameter named by queryNames', async () => {
    const relay = await start({ queryNames: { status: 'state', statusExplode: false } });
    const event = relay.addEvent({ body: '{}' });
    relay.addDelivery({ eventId: event.id, destinationId: V7, status: 'dead' });
    relay.addDelivery({ eventId: event.id, destinationId: V7, status: 'failed' });
    const api = relayClient({ baseUrl: relay.url, apiKey: KEY, queryNames: { deliveries: { status: 'state' } } });
    expect(await collect(api.deliveries({ statuses: ['dead', 'failed'] }))).toHaveLength(2);
    expect(relay.requests.at(-1)!.query).toEqual([['state', 'dead,failed']]);
  });

  /** The emulator's description with the deliveries' parameters replaced. */
  async function describedAs(parameters: unknown[]): Promise<RelayEmulator> {
    const base = await start();
    const document = (await (await fetch(`${base.url}/openapi.json`)).json()) as { paths: Record<string, { get: { parameters: unknown[] } }> };
    document.paths['/v1/deliveries']!.get.parameters = parameters;
    return start({ openapi: document });
  }
  const param = (name: string, extra: Record<string, unknown> = {}) => ({ name, in: 'query', schema: { type: 'string' }, ...extra });

  it('refuses two candidates for a role, naming the operation and the option, before any request', async () => {
    const relay = await describedAs([param('cursor'), param('after'), param('limit', { schema: { type: 'integer' } })]);
    const error = await relayFailure(collect(relayClient({ baseUrl: relay.url, apiKey: KEY }).deliveries()));
    expect(error).toMatchObject({ code: 'QUERY_NAMES', operation: 'GET /v1/deliveries' });
    expect(error.message).toMatch(/"cursor", "after"/);
    expect(error.message).toContain('queryNames.deliveries.cursor');
    expect(relay.requests.map((request) => request.path)).toEqual(['/openapi.json']);
  });

  it('refuses a role with no candidate when the call needs it', async () => {
    const relay = await describedAs([param('cursor'), param('limit', { schema: { type: 'integer' } })]);
    const api = relayClient({ baseUrl: relay.url, apiKey: KEY });
    const error = await relayFailure(collect(api.deliveries({ statuses: ['dead'] })));
    expect(error).toMatchObject({ code: 'QUERY_NAMES', operation: 'GET /v1/deliveries' });
    expect(error.message).toContain('queryNames.deliveries.status');
    expect(relay.requests.map((request) => request.path)).toEqual(['/openapi.json']);
    // A call that needs no status filter goes ahead.
    expect(await collect(api.deliveries())).toEqual([]);
  });

  it('refuses a required parameter it has no role for', async () => {
    const relay = await describedAs([param('cursor'), param('region', { required: true })]);
    const error = await relayFailure(collect(relayClient({ baseUrl: relay.url, apiKey: KEY }).deliveries()));
    expect(error).toMatchObject({ code: 'QUERY_NAMES' });
    expect(error.message).toContain('"region"');
    expect(error.message).toContain('queryNames.deliveries');
  });

  it('refuses a status style it cannot send', async () => {
    const relay = await describedAs([param('cursor'), param('status', { style: 'deepObject', explode: true })]);
    const error = await relayFailure(collect(relayClient({ baseUrl: relay.url, apiKey: KEY }).deliveries({ statuses: ['dead'] })));
    expect(error).toMatchObject({ code: 'QUERY_NAMES', operation: 'GET /v1/deliveries' });
    expect(error.message).toContain('deepObject');
  });

  it('lets queryNames settle an ambiguity, and skips the description when every role is named', async () => {
    const relay = await describedAs([param('cursor'), param('after'), param('limit', { schema: { type: 'integer' } })]);
    const event = relay.addEvent({ body: '{}' });
    relay.addDelivery({ eventId: event.id, destinationId: V7, status: 'dead' });
    relay.addDelivery({ eventId: event.id, destinationId: V7, status: 'dead' });
    const settled = relayClient({ baseUrl: relay.url, apiKey: KEY, queryNames: { deliveries: { cursor: 'cursor' } } });
    expect(await collect(settled.deliveries({ limit: 1 }))).toHaveLength(2);

    const before = relay.requests.filter((request) => request.path === '/openapi.json').length;
    const named = relayClient({ baseUrl: relay.url, apiKey: KEY, queryNames: { deliveries: { cursor: 'cursor', limit: 'limit', destination: 'destinationId', subscription: 'subscriptionId', status: 'status' } } });
    expect(await collect(named.deliveries({ limit: 1, statuses: ['dead'] }))).toHaveLength(2);
    expect(relay.requests.filter((request) => request.path === '/openapi.json')).toHaveLength(before);
    expect(thrown(() => relayClient({ baseUrl: relay.url, apiKey: KEY, queryNames: { deliveries: { colour: 'x' } as never } }))).toBeInstanceOf(TypeError);
  });

  it('says so when the description cannot be read', async () => {
    emulator.failNext(1, { status: 500 });
    const error = await relayFailure(collect(client({ retryBudgetMs: 0 }).deliveries()));
    expect(error).toMatchObject({ code: 'OPENAPI_UNAVAILABLE', status: 500 });
    expect(error.message).toContain('queryNames');
    // Not cached: the next call reads it again.
    expect(await collect(client().deliveries())).toEqual([]);
  });
});

describe('waitTrigger', () => {
  it('hands out events with inline bodies, truncated at the cap, then caughtUp', async () => {
    const relay = client();
    const trigger = emulator.addTrigger();
    const long = emulator.addEvent({ body: 'a'.repeat(100) });
    const short = emulator.addEvent({ body: '{"ok":true}', verificationState: 'unattempted' });
    const first = await relay.waitTrigger(trigger, { limit: 1, maxInlineBytes: 10 });
    expect(first.caughtUp).toBe(false);
    expect(first.events).toEqual([expect.objectContaining({ id: long.id, body: 'a'.repeat(10), bodyEncoding: 'utf8', bodyTruncated: true, verificationState: 'verified', dedupKey: long.dedupKey })]);
    const second = await relay.waitTrigger(trigger, { cursor: first.nextCursor!, limit: 10, maxInlineBytes: 11 });
    expect(second.events).toEqual([expect.objectContaining({ id: short.id, body: '{"ok":true}', bodyTruncated: false, verificationState: 'unattempted' })]);
    expect(second.caughtUp).toBe(true);
    const none = await relay.waitTrigger(trigger, { cursor: second.nextCursor!, inlineBodies: false });
    expect(none).toMatchObject({ events: [], caughtUp: true });
    const bare = await relay.waitTrigger(trigger, { inlineBodies: false });
    expect(bare.events[0]).not.toHaveProperty('body');
    // A UTF-8 body is cut at a character boundary: 'é' is two bytes, so a cap of 3 keeps one.
    const accented = emulator.addTrigger({ endpointId: emulator.addEvent({ body: 'éé', endpointId: V7 }).endpointId });
    expect((await relay.waitTrigger(accented, { maxInlineBytes: 3 })).events[0]).toMatchObject({ body: 'é', bodyTruncated: true, bodyEncoding: 'utf8' });
  });
});
