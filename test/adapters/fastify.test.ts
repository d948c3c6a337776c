import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fastify4 from 'fastify4';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { webhooks } from '../../adapters/fastify.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { PermanentError, WebhookError } from '../../src/errors.ts';
import { StoreError } from '../../src/stores/types.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import {
  adapterConformance,
  BODY_UNAVAILABLE_MESSAGE,
  expectDuplicate,
  expectEnvelope,
  expectProcessed,
  JSON_TYPE,
  Recorder,
  signed,
  type Endpoint,
  type Outgoing,
  type Reply,
} from './conformance.ts';
import { listen, postOverHttp, realHttpBehaviour, type Served } from './node-http.ts';

type Factory = typeof Fastify;

// Fastify 4 runs the same plugin; its instance types differ in details these tests do not touch.
const VERSIONS: [string, Factory][] = [
  ['Fastify 5', Fastify],
  ['Fastify 4', fastify4 as unknown as Factory],
];

/**
 * An app with the plugin in a scope holding `/hook` (and whatever `inScope` adds), and whatever
 * `outside` adds at the root.
 */
async function buildApp(
  factory: Factory,
  options: AdapterOptions,
  recorder: Recorder,
  {
    before,
    inScope,
    outside,
  }: { before?: (scope: FastifyInstance) => void; inScope?: (scope: FastifyInstance) => void; outside?: (app: FastifyInstance) => void } = {},
): Promise<FastifyInstance> {
  const app = factory();
  app.register(async (scope) => {
    before?.(scope);
    await scope.register(webhooks, options);
    const route = async (request: FastifyRequest, reply: FastifyReply) => {
      // The handler reads request.body like any Fastify handler.
      const { status, body } = await recorder.handle(request.webhook, request.body);
      return reply.code(status).send(body);
    };
    // `/hook` and any path under it: the rejection-context test sends control characters in the path.
    scope.post('/hook', route);
    scope.post('/hook/*', route);
    inScope?.(scope);
  });
  outside?.(app);
  await app.ready();
  return app;
}

function endpointOf(app: FastifyInstance): Endpoint {
  return {
    async send({ headers, body, path = '/hook' }: Outgoing): Promise<Reply> {
      const res = await app.inject({ method: 'POST', url: path, headers, payload: typeof body === 'string' ? body : Buffer.from(body) });
      const replyHeaders = Object.fromEntries(Object.entries(res.headers).map(([name, value]) => [name, String(value)]));
      return { status: res.statusCode, headers: replyHeaders, body: res.body };
    },
    close: () => app.close(),
  };
}

/** The app on a real server: inject() for the ordinary sends, real HTTP for the rest. */
async function served(factory: Factory, options: AdapterOptions, recorder: Recorder): Promise<Served> {
  const app = await buildApp(factory, options, recorder);
  const listening = await listen(app.server);
  return {
    server: app.server,
    port: listening.port,
    endpoint: endpointOf(app),
    close: async () => {
      await listening.close();
      await app.close();
    },
  };
}

for (const [label, factory] of VERSIONS) {
  adapterConformance(label, async (options, recorder) => endpointOf(await buildApp(factory, options, recorder)));
  realHttpBehaviour(label, (options, recorder) => served(factory, options, recorder), { closesConnection: true });

  describe(`${label}: bodies in the scope`, () => {
    const apps: FastifyInstance[] = [];
    afterEach(async () => {
      await Promise.all(apps.splice(0).map((app) => app.close()));
    });

    async function setup(options: Partial<AdapterOptions> = {}, extra: Parameters<typeof buildApp>[3] = {}) {
      const secret = generateSecret();
      const recorder = new Recorder();
      const rejected: unknown[] = [];
      const app = await buildApp(factory, { secrets: secret, onRejected: (error) => rejected.push(error), onError: () => {}, ...options }, recorder, extra);
      apps.push(app);
      return { secret, recorder, rejected, app, endpoint: endpointOf(app) };
    }

    it('gives request.body as parsed JSON and verifies the exact bytes', async () => {
      const { secret, recorder, endpoint } = await setup();
      // Spacing that JSON.parse + JSON.stringify would not reproduce: only the raw bytes verify.
      const body = '{ "type":  "a", "n": [1, 2] }';
      const message = await signWebhook({ secret, body });
      expectProcessed(await endpoint.send({ headers: { ...message.headers, ...JSON_TYPE }, body }), message.id);
      expect(recorder.runs).toMatchObject([{ id: message.id, event: { type: 'a', n: [1, 2] } }]);
    });

    for (const [type, expected] of [
      ['application/vnd.events+json; charset=utf-8', { type: 'a' }],
      ['text/plain; charset=utf-8', '{"type":"a"}'],
      ['application/octet-stream', Buffer.from('{"type":"a"}')],
      [undefined, Buffer.from('{"type":"a"}')],
    ] as const) {
      it(`parses ${type ?? 'a body without content-type'} like Fastify would, or keeps it as bytes`, async () => {
        const { secret, recorder, endpoint } = await setup();
        const body = '{"type":"a"}';
        const message = await signWebhook({ secret, body });
        const headers: Record<string, string> = { ...message.headers };
        if (type !== undefined) headers['content-type'] = type;
        expectProcessed(await endpoint.send({ headers, body }), message.id);
        expect(recorder.runs).toMatchObject([{ id: message.id }]);
        expect(recorder.runs[0]!.event).toEqual(expected);
      });
    }

    it('answers a verified body that is not JSON 400 INVALID_PAYLOAD in the envelope, over real HTTP, and releases the claim', async () => {
      const secret = generateSecret();
      const recorder = new Recorder();
      const server = await served(factory, { secrets: secret }, recorder);
      try {
        const body = '{"type": ';
        const message = await signWebhook({ secret, body });
        for (let attempt = 0; attempt < 2; attempt++) {
          const reply = await postOverHttp(server.port, '/hook', { ...message.headers, ...JSON_TYPE }, body);
          expect(expectEnvelope(reply, 400, 'INVALID_PAYLOAD')).toBe('the payload is not valid JSON');
        }
        expect(recorder.runs).toEqual([]);
        // Released: the same id with a JSON body runs.
        const fixed = await signed(secret, { type: 'a' }, { id: message.id });
        expectProcessed(await postOverHttp(server.port, '/hook', fixed.headers, fixed.body), message.id);
      } finally {
        await server.close();
      }
    });

    it("answers a route's WebhookError and PermanentError in the envelope over real HTTP, and leaves other errors to the scope's error handler", async () => {
      const secret = generateSecret();
      const app = factory();
      const handled: unknown[] = [];
      app.register(async (scope) => {
        await scope.register(webhooks, { secrets: secret });
        // The app's own error handler in the same scope: set without a warning, and still called for errors not the package's.
        scope.setErrorHandler((error, _request, reply) => {
          handled.push(error);
          return reply.code(599).type('text/plain').send('the app answered');
        });
        scope.post('/async', async (request) => {
          const kase = request.headers['x-case'];
          if (kase === 'permanent') throw new PermanentError('no such order');
          if (kase === 'webhook-error') throw new WebhookError('INVALID_PAYLOAD', 'the order id is not a string');
          if (kase === 'server-fault') throw new WebhookError('INVALID_NAMESPACE', 'the namespace function threw');
          if (kase === 'store-lost') throw new StoreError('postgres', 'not_ready', 'the connection to PostgreSQL was lost');
          throw new Error('a bug in the route');
        });
        // A handler that is not async: its throw is caught as well.
        scope.post('/sync', (request, reply) => {
          if (request.headers['x-case'] === 'permanent') throw new PermanentError('no such order');
          void reply.code(204).send();
        });
      });
      const warnings = vi.spyOn(process, 'emitWarning');
      await app.ready();
      const listening = await listen(app.server);
      try {
        const send = async (path: string, kase: string) => {
          const message = await signed(secret, { type: 'a' });
          return postOverHttp(listening.port, path, { ...message.headers, 'x-case': kase }, message.body);
        };
        expect(expectEnvelope(await send('/async', 'permanent'), 422, 'PERMANENT_FAILURE')).toBe('no such order');
        expect(expectEnvelope(await send('/async', 'webhook-error'), 400, 'INVALID_PAYLOAD')).toBe('the order id is not a string');
        expect(expectEnvelope(await send('/sync', 'permanent'), 422, 'PERMANENT_FAILURE')).toBe('no such order');
        expect((await send('/sync', 'ok')).status).toBe(204);
        expect(expectEnvelope(await send('/async', 'store-lost'), 503, 'STORE_UNAVAILABLE')).toMatch(/retry later/);
        expect(handled).toEqual([]);
        for (const kase of ['server-fault', 'foreign']) expect((await send('/async', kase)).body).toBe('the app answered');
        expect(handled).toMatchObject([{ code: 'INVALID_NAMESPACE' }, { message: 'a bug in the route' }]);
        expect(warnings.mock.calls.filter(([warning]) => String(warning).includes('errorHandler'))).toEqual([]);
      } finally {
        warnings.mockRestore();
        await listening.close();
        await app.close();
      }
    });

    it('refuses an unverified body that is not JSON in our envelope, before parsing errors', async () => {
      const { endpoint, rejected } = await setup();
      const body = '{"type": ';
      const message = await signWebhook({ secret: generateSecret(), body });
      expectEnvelope(await endpoint.send({ headers: { ...message.headers, ...JSON_TYPE }, body }), 401, 'SIGNATURE_MISMATCH');
      expect(rejected).toMatchObject([{ code: 'SIGNATURE_MISMATCH' }]);
    });

    it('keeps Fastify’s prototype-poisoning protection', async () => {
      const { secret, recorder, endpoint } = await setup();
      const body = '{"type":"a","__proto__":{"admin":true}}';
      const message = await signWebhook({ secret, body });
      const reply = await endpoint.send({ headers: { ...message.headers, ...JSON_TYPE }, body });
      expect(reply.status).toBe(400);
      expect(recorder.runs).toEqual([]);
    });

    it('verifies before schema validation, and releases the claim when validation fails', async () => {
      const schema = { body: { type: 'object', required: ['amount'], properties: { amount: { type: 'number' } } } };
      let runs = 0;
      const { secret, endpoint } = await setup(
        {},
        {
          inScope: (scope) =>
            scope.post('/strict', { schema }, async (request) => {
              runs++;
              return { id: request.webhook?.id };
            }),
        },
      );
      const forged = await signed(generateSecret(), { type: 'a' });
      expectEnvelope(await endpoint.send({ ...forged, path: '/strict' }), 401, 'SIGNATURE_MISMATCH');
      const invalid = await signed(secret, { type: 'a' });
      const reply = await endpoint.send({ ...invalid, path: '/strict' });
      expect(reply.status).toBe(400);
      expect(JSON.parse(reply.body)).toMatchObject({ code: 'FST_ERR_VALIDATION' });
      // Released: the same id with a valid body is processed.
      const valid = await signed(secret, { type: 'a', amount: 5 }, { id: invalid.id });
      const ok = await endpoint.send({ ...valid, path: '/strict' });
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body)).toEqual({ id: invalid.id });
      expect(runs).toBe(1);
    });

    it('refuses a body another parser read in the scope, with 500 BODY_UNAVAILABLE', async () => {
      const { secret, recorder, endpoint, rejected } = await setup(
        {},
        { inScope: (scope) => scope.addContentTypeParser('application/xml', { parseAs: 'string' }, (_request, body, done) => done(null, { xml: body })) },
      );
      const body = '<event type="a"/>';
      const message = await signWebhook({ secret, body });
      const text = expectEnvelope(await endpoint.send({ headers: { ...message.headers, 'content-type': 'application/xml' }, body }), 500, 'BODY_UNAVAILABLE');
      expect(text).toBe(BODY_UNAVAILABLE_MESSAGE);
      // The fix is the hint: in the log, never in the answer.
      expect((rejected[0] as { hint?: string }).hint).toContain('add custom parsers outside that scope');
      expect(recorder.runs).toEqual([]);
    });

    it('completes the claim when an earlier onResponse hook takes its time (the socket closes first)', async () => {
      const { secret, recorder, endpoint } = await setup(
        {},
        { before: (scope) => scope.addHook('onResponse', () => new Promise<void>((resolve) => setTimeout(resolve, 30))) },
      );
      const request = await signed(secret, { type: 'a' });
      expectProcessed(await endpoint.send(request), request.id);
      await vi.waitFor(async () => expectDuplicate(await endpoint.send(request)), { timeout: 2000, interval: 20 });
      expect(recorder.runs).toHaveLength(1);
    });

    it('verifies every route of the scope, also without a body', async () => {
      const { secret, app } = await setup({}, { inScope: (scope) => scope.get('/status', async (request) => ({ id: request.webhook?.id })) });
      const unsigned = await app.inject({ method: 'GET', url: '/status' });
      expect(unsigned.statusCode).toBe(400);
      expect(JSON.parse(unsigned.body)).toMatchObject({ error: 'MISSING_ID' });
      const message = await signWebhook({ secret, body: '' });
      const res = await app.inject({ method: 'GET', url: '/status', headers: message.headers });
      expect(res.json()).toEqual({ id: message.id });
    });
  });

  describe(`${label}: scopes`, () => {
    const apps: FastifyInstance[] = [];
    afterEach(async () => {
      await Promise.all(apps.splice(0).map((app) => app.close()));
    });

    it('leaves routes outside the scope, and their body parsing, untouched', async () => {
      const secret = generateSecret();
      const recorder = new Recorder();
      const app = await buildApp(factory, { secrets: secret }, recorder, {
        outside: (root) => {
          root.post('/plain', async (request) => ({ body: request.body, webhook: request.webhook === undefined ? 'absent' : request.webhook }));
        },
      });
      apps.push(app);
      const json = await app.inject({ method: 'POST', url: '/plain', headers: JSON_TYPE, payload: '{"hello":"world"}' });
      expect(json.statusCode).toBe(200);
      expect(json.json()).toEqual({ body: { hello: 'world' }, webhook: 'absent' });
      // Fastify's default parsers only: an unknown type is still 415 outside the scope.
      const xml = await app.inject({ method: 'POST', url: '/plain', headers: { 'content-type': 'application/xml' }, payload: '<a/>' });
      expect(xml.statusCode).toBe(415);
      const empty = await app.inject({ method: 'POST', url: '/plain', headers: JSON_TYPE, payload: '' });
      expect(empty.statusCode).toBe(400);
      expect(empty.json()).toMatchObject({ code: 'FST_ERR_CTP_EMPTY_JSON_BODY' });
      expect(recorder.runs).toEqual([]);
    });

    it('verifies each scope with its own options', async () => {
      const billing = generateSecret();
      const shipping = generateSecret();
      const app = factory();
      for (const [prefix, secret] of [
        ['/billing', billing],
        ['/shipping', shipping],
      ] as const) {
        app.register(
          async (scope) => {
            await scope.register(webhooks, { secrets: secret, onRejected: () => {} });
            scope.post('/hook', async (request) => ({ id: request.webhook?.id }));
          },
          { prefix },
        );
      }
      await app.ready();
      apps.push(app);
      const endpoint = endpointOf(app);
      const toBilling = await signed(billing, { type: 'a' });
      expect(JSON.parse((await endpoint.send({ ...toBilling, path: '/billing/hook' })).body)).toEqual({ id: toBilling.id });
      expectEnvelope(await endpoint.send({ ...toBilling, path: '/shipping/hook' }), 401, 'SIGNATURE_MISMATCH');
      const toShipping = await signed(shipping, { type: 'a' });
      expect(JSON.parse((await endpoint.send({ ...toShipping, path: '/shipping/hook' })).body)).toEqual({ id: toShipping.id });
    });
  });
}

describe('Fastify: the plugin itself', () => {
  it('is a fastify-plugin with a name and a version range', () => {
    const meta = (webhooks as unknown as Record<symbol, unknown>)[Symbol.for('plugin-meta')];
    expect(meta).toMatchObject({ name: 'webhook-receiver', fastify: '4.x || 5.x' });
    expect((webhooks as unknown as Record<symbol, unknown>)[Symbol.for('skip-override')]).toBe(true);
    expect(webhooks.name).toBe('webhooks');
  });

  it('fails app.ready() with a TypeError for bad options', async () => {
    const app = Fastify();
    app.register(async (scope) => {
      await scope.register(webhooks, { secrets: 'not a secret' });
    });
    await expect(app.ready()).rejects.toThrow(TypeError);
    await app.close();
  });
});
