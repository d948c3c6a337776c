import { readFileSync } from 'node:fs';
import { Hono as HonoLatest } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { Hono as Hono46 } from 'hono46';
import { describe, expect, it } from 'vitest';
import { webhooks, type WebhookVariables } from '../../adapters/hono.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import {
  adapterConformance,
  BODY_UNAVAILABLE_MESSAGE,
  bodyInit,
  expectDuplicate,
  expectEnvelope,
  JSON_TYPE,
  Recorder,
  signed,
  type Endpoint,
  type Outgoing,
  type Reply,
} from './conformance.ts';
import { realHttpBehaviour, servedFetch } from './node-http.ts';

type Hono = HonoLatest;
type HonoClass = typeof HonoLatest;

/**
 * The Hono installed for development, and the lowest version the peer range allows (4.6.0):
 * the middleware relies on `HonoRequest.bodyCache`, whose shape has to hold across that range.
 * Their types differ in details these tests do not touch.
 */
const VERSIONS: [string, HonoClass][] = [
  ['Hono', HonoLatest],
  ['Hono 4.6.0', Hono46 as unknown as HonoClass],
];

function buildApp(Hono: HonoClass, options: AdapterOptions, recorder: Recorder): Hono {
  const app = new Hono();
  // `/hook` and any path under it (Hono 4.6's `*` stops at a decoded line break): the
  // rejection-context test sends control characters in the path.
  app.on('POST', ['/hook', '/hook/:rest{[\\s\\S]+}'], webhooks(options), async (c) => {
    // The body was read by the middleware; c.req.json() still works.
    const { status, body } = await recorder.handle(c.get('webhook'), await c.req.json());
    return c.json(body, status as ContentfulStatusCode);
  });
  // The default onError logs the error; answer quietly instead.
  app.onError((_error, c) => c.json({ failed: true }, 500));
  return app;
}

function replyOf(res: Response, body: string): Reply {
  return { status: res.status, headers: Object.fromEntries(res.headers), body };
}

function endpointOf(app: Hono): Endpoint {
  return {
    async send({ headers, body, path = '/hook' }: Outgoing): Promise<Reply> {
      const res = await app.request(path, { method: 'POST', headers, body: bodyInit(body) });
      return replyOf(res, await res.text());
    },
    close: async () => undefined,
  };
}

for (const [label, Hono] of VERSIONS) {
  adapterConformance(`${label} (app.request)`, async (options, recorder) => endpointOf(buildApp(Hono, options, recorder)));
  adapterConformance(`${label} (@hono/node-server, real HTTP)`, async (options, recorder) => (await servedFetch(buildApp(Hono, options, recorder).fetch)).endpoint);
  // @hono/node-server tells when the client leaves; connection handling is the server's.
  realHttpBehaviour(`${label} (@hono/node-server)`, (options, recorder) => servedFetch(buildApp(Hono, options, recorder).fetch), { closesConnection: false });

  describe(`${label}: the body after the middleware`, () => {
    it('lets the route read c.req.json(), c.req.text() and c.req.arrayBuffer(), as often as it likes', async () => {
      const secret = generateSecret();
      const app = new Hono<{ Variables: WebhookVariables }>();
      app.post('/hook', webhooks({ secrets: secret }), async (c) => {
        const json = await c.req.json<{ type: string }>();
        const text = await c.req.text();
        const bytes = new Uint8Array(await c.req.arrayBuffer());
        const again = await c.req.json<{ type: string }>();
        return c.json({ json, text, bytes: bytes.byteLength, again, id: c.get('webhook').id, same: text === c.var.webhook.text() });
      });
      const body = '{ "type":  "a" }';
      const message = await signWebhook({ secret, body });
      const res = await app.request('/hook', { method: 'POST', headers: { ...message.headers, ...JSON_TYPE }, body });
      expect(await res.json()).toEqual({ json: { type: 'a' }, text: body, bytes: body.length, again: { type: 'a' }, id: message.id, same: true });
    });

    it('verifies the bytes an earlier middleware read with c.req.arrayBuffer()', async () => {
      const secret = generateSecret();
      const app = new Hono();
      let seen = 0;
      app.use(async (c, next) => {
        seen = (await c.req.arrayBuffer()).byteLength;
        await next();
      });
      app.post('/hook', webhooks({ secrets: secret }), async (c) => c.json(await c.req.json()));
      const request = await signed(secret, { type: 'a' });
      const res = await app.request('/hook', { method: 'POST', headers: request.headers, body: request.body });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ type: 'a' });
      expect(seen).toBe(request.body.length);
    });

    it('refuses with 500 BODY_UNAVAILABLE, saying how to mount it, when an earlier middleware parsed the JSON', async () => {
      const secret = generateSecret();
      const app = new Hono();
      const rejected: unknown[] = [];
      app.use(async (c, next) => {
        await c.req.json();
        await next();
      });
      app.post('/hook', webhooks({ secrets: secret, onRejected: (error) => rejected.push(error) }), (c) => c.text('ran'));
      const request = await signed(secret, { type: 'a' });
      const res = await app.request('/hook', { method: 'POST', headers: request.headers, body: request.body });
      const message = expectEnvelope(replyOf(res, await res.text()), 500, 'BODY_UNAVAILABLE');
      // How the server is built is the operator's business: the fix is the hint, for the log only.
      expect(message).toBe(BODY_UNAVAILABLE_MESSAGE);
      expect(rejected).toMatchObject([{ code: 'BODY_UNAVAILABLE', hint: expect.stringContaining('Mount webhooks() before any middleware that reads the body') }]);
    });

    it('releases the claim when the route throws and onError answers 2xx anyway', async () => {
      const secret = generateSecret();
      const app = new Hono();
      let runs = 0;
      app.post('/hook', webhooks({ secrets: secret }), () => {
        runs++;
        if (runs === 1) throw new Error('first attempt fails');
        return new Response(null, { status: 204 });
      });
      app.onError((_error, c) => c.json({ accepted: 'later' }, 202));
      const request = await signed(secret, { type: 'a' });
      const send = () => app.request('/hook', { method: 'POST', headers: request.headers, body: request.body });
      expect((await send()).status).toBe(202);
      expect((await send()).status).toBe(204);
      const duplicate = await send();
      expectDuplicate(replyOf(duplicate, await duplicate.text()));
      expect(runs).toBe(2);
    });
  });

  describe(`${label}: the claim follows the answer the client received`, () => {
    it('releases the claim when the route returns no Response (Hono answers 500), so the retry runs it', async () => {
      const secret = generateSecret();
      const app = new Hono();
      let runs = 0;
      app.post('/hook', webhooks({ secrets: secret }), ((c: { body: (body: null, status: 204) => Response }) => {
        runs++;
        // The first attempt forgets to return its Response.
        if (runs === 1) return undefined;
        return c.body(null, 204);
      }) as never);
      app.onError((_error, c) => c.json({ failed: true }, 500));
      const served = await servedFetch(app.fetch);
      try {
        const request = await signed(secret, { type: 'a' });
        const first = await served.endpoint.send(request);
        expect(first.status).toBe(500);
        // Told it failed, the sender retries: the route runs again, and that success completes.
        expect((await served.endpoint.send(request)).status).toBe(204);
        expectDuplicate(await served.endpoint.send(request));
        expect(runs).toBe(2);
      } finally {
        await served.close();
      }
    });

    it("answers c.req.json() on a body that is not JSON 400 INVALID_PAYLOAD, over real HTTP, and releases the claim", async () => {
      const secret = generateSecret();
      const app = new Hono();
      app.post('/hook', webhooks({ secrets: secret, onRejected: () => {} }), async (c) => c.json(await c.req.json()));
      app.onError((_error, c) => c.json({ failed: true }, 500));
      const served = await servedFetch(app.fetch);
      try {
        const message = await signWebhook({ secret, body: '{"type": ' });
        for (let attempt = 0; attempt < 2; attempt++) {
          const reply = await served.endpoint.send({ headers: { ...message.headers, ...JSON_TYPE }, body: '{"type": ' });
          expect(expectEnvelope(reply, 400, 'INVALID_PAYLOAD')).toBe('the payload is not valid JSON');
        }
        const fixed = await signed(secret, { type: 'a' }, { id: message.id });
        const reply = await served.endpoint.send(fixed);
        expect([reply.status, JSON.parse(reply.body)]).toEqual([200, { type: 'a' }]);
      } finally {
        await served.close();
      }
    });
  });

  describe(`${label}: a client that left (request.signal aborted)`, () => {
    it('completes the claim when the route succeeded after the signal was aborted, so the retry is a duplicate', async () => {
      const secret = generateSecret();
      const client = new AbortController();
      const runs: string[] = [];
      const app = new Hono();
      app.post('/hook', webhooks({ secrets: secret }), (c) => {
        runs.push(c.get('webhook').id);
        if (runs.length === 1) client.abort();
        return c.json({ id: c.get('webhook').id });
      });
      const request = await signed(secret, { type: 'a' });
      const first = await app.request(new Request('http://localhost/hook', { method: 'POST', headers: request.headers, body: request.body, signal: client.signal }));
      expect(first.status).toBe(200);
      // The sender's retry must not run a route that succeeded: it is answered as a duplicate.
      const retry = await app.request('/hook', { method: 'POST', headers: request.headers, body: request.body });
      expectDuplicate(replyOf(retry, await retry.text()));
      expect(runs).toEqual([request.id]);
    });

    it('does not run the route when the signal was already aborted, and releases the claim', async () => {
      const secret = generateSecret();
      const runs: string[] = [];
      const app = new Hono();
      app.post('/hook', webhooks({ secrets: secret }), (c) => {
        runs.push(c.get('webhook').id);
        return c.body(null, 204);
      });
      const request = await signed(secret, { type: 'a' });
      const gone = await app.request(new Request('http://localhost/hook', { method: 'POST', headers: request.headers, body: request.body, signal: AbortSignal.abort() }));
      expect([gone.status, await gone.text()]).toEqual([499, '']);
      expect(runs).toEqual([]);
      expect((await app.request('/hook', { method: 'POST', headers: request.headers, body: request.body })).status).toBe(204);
      expect(runs).toEqual([request.id]);
    });
  });
}

describe('Hono: construction and portability', () => {
  it('is tested on the lowest Hono of its peer range', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { peerDependencies: Record<string, string> };
    const lowest = JSON.parse(readFileSync(new URL('../../node_modules/hono46/package.json', import.meta.url), 'utf8')) as { version: string };
    expect(pkg.peerDependencies.hono).toBe(`^${lowest.version}`);
    expect(lowest.version).toBe('4.6.0');
  });

  it('validates options at once and names the middleware after its factory', () => {
    expect(() => webhooks({ secrets: 'not a secret' })).toThrow(TypeError);
    expect(() => webhooks({ secrets: generateSecret(), unsigned: 'maybe' as never })).toThrow(TypeError);
    expect(webhooks({ secrets: generateSecret() }).name).toBe('webhooks');
  });
});
