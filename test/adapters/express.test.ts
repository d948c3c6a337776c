import { createServer } from 'node:http';
import express5 from 'express';
import express4 from 'express4';
import request from 'supertest';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { webhookErrorHandler, webhookOf, webhooks } from '../../adapters/express.ts';
import { PermanentError, WebhookError } from '../../src/errors.ts';
import { StoreError } from '../../src/stores/types.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { VerifiedWebhook } from '../../src/verify.ts';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import {
  adapterConformance,
  BODY_UNAVAILABLE_MESSAGE,
  expectDuplicate,
  expectEnvelope,
  expectProcessed,
  gatedStore,
  JSON_TYPE,
  Recorder,
  signed,
  type Endpoint,
  type Outgoing,
  type Reply,
} from './conformance.ts';
import { listen, postAndLeave, realHttpBehaviour, type Served } from './node-http.ts';

type Express = typeof express5;
type App = ReturnType<Express>;

// Express 4 runs the same code; its types differ in details these tests do not touch.
const VERSIONS: [string, Express][] = [
  ['Express 5', express5],
  ['Express 4', express4 as unknown as Express],
];

/** How the app handles the body before `webhooks()`. */
type Mount = 'none' | 'raw' | 'text' | 'json-verify' | 'json-first';

function buildApp(express: Express, options: AdapterOptions, recorder: Recorder, mount: Mount = 'none'): App {
  const app = express();
  if (mount === 'json-first') app.use(express.json());
  const before =
    mount === 'raw'
      ? [express.raw({ type: '*/*' })]
      : mount === 'text'
        ? [express.text({ type: '*/*' })]
        : mount === 'json-verify'
          ? [express.json({ verify: (req, _res, buf) => void ((req as { rawBody?: Buffer }).rawBody = buf) })]
          : [];
  // `/hook` and any path under it: the rejection-context test sends control characters in the path.
  app.post(/^\/hook(\/.*)?$/, ...before, webhooks(options), (req, res, next) => {
    // With a parser in front, the handler reads req.body as usual; otherwise req.webhook.json().
    const event = mount === 'json-verify' ? req.body : req.webhook?.json();
    // Express 4 does not catch rejected promises: errors go to next() by hand.
    recorder.handle(req.webhook, event).then(({ status, body }) => void res.status(status).json(body), next);
  });
  // As every guide mounts it: the route's refusals (INVALID_PAYLOAD, PermanentError) in the envelope.
  app.use(webhookErrorHandler());
  return app;
}

async function endpointOf(app: App): Promise<Endpoint & Served> {
  const server = createServer(app);
  const listening = await listen(server);
  const endpoint: Endpoint = {
    async send({ headers, body, path = '/hook' }: Outgoing): Promise<Reply> {
      // Bytes go as they are (superagent would write a Buffer with a JSON content type as JSON).
      const res = await request(server).post(path).set(headers).serialize((value: unknown) => value as string).send(typeof body === 'string' ? body : Buffer.from(body));
      return { status: res.status, headers: res.headers as Record<string, string>, body: res.text };
    },
    close: listening.close,
  };
  return { ...endpoint, endpoint, server, port: listening.port };
}

for (const [label, express] of VERSIONS) {
  adapterConformance(label, (options, recorder) => endpointOf(buildApp(express, options, recorder)));
  realHttpBehaviour(label, (options, recorder) => endpointOf(buildApp(express, options, recorder)), { closesConnection: true });

  describe(`${label}: the raw body`, () => {
    const open: Endpoint[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((endpoint) => endpoint.close()));
    });

    async function setup(mount: Mount, options: Partial<AdapterOptions> = {}) {
      const secret = generateSecret();
      const recorder = new Recorder();
      const rejected: unknown[] = [];
      const endpoint = await endpointOf(buildApp(express, { secrets: secret, onRejected: (error) => rejected.push(error), ...options }, recorder, mount));
      open.push(endpoint);
      return { secret, recorder, rejected, endpoint };
    }

    for (const mount of ['raw', 'text', 'json-verify'] as const) {
      it(`verifies the bytes kept by ${mount === 'json-verify' ? 'a verify callback (req.rawBody)' : `express.${mount}()`}`, async () => {
        const { secret, recorder, endpoint } = await setup(mount);
        // Spacing that JSON.parse + JSON.stringify would not reproduce: only the raw bytes verify.
        const body = '{ "type":  "a" }';
        const message = await signWebhook({ secret, body });
        expectProcessed(await endpoint.send({ headers: { ...message.headers, ...JSON_TYPE }, body }), message.id);
        expect(recorder.runs).toMatchObject([{ id: message.id, event: { type: 'a' } }]);
      });
    }

    it('behind express.raw(), a gzip or deflate body is inflated once (by the parser), and br is refused as elsewhere', async () => {
      const { secret, recorder, endpoint, rejected } = await setup('raw');
      for (const [encoding, encode] of [['gzip', gzipSync], ['deflate', deflateSync]] as const) {
        const request = await signed(secret, { type: encoding });
        const reply = await endpoint.send({ headers: { ...request.headers, 'content-encoding': encoding }, body: new Uint8Array(encode(Buffer.from(request.body))) });
        expectProcessed(reply, request.id);
      }
      expect(recorder.runs.map((run) => run.event)).toEqual([{ type: 'gzip' }, { type: 'deflate' }]);
      // body-parser inflates br too; the rule is the same for every adapter, so it is refused.
      const request = await signed(secret, { type: 'br' });
      const reply = await endpoint.send({ headers: { ...request.headers, 'content-encoding': 'br' }, body: new Uint8Array(brotliCompressSync(Buffer.from(request.body))) });
      expect(recorder.runs).toHaveLength(2);
      if (label === 'Express 5') {
        expectEnvelope(reply, 415, 'UNSUPPORTED_ENCODING');
        expect(rejected).toMatchObject([{ code: 'UNSUPPORTED_ENCODING' }]);
      } else {
        // body-parser 1 (Express 4) cannot inflate br and answers its own 415 before webhooks() runs.
        expect(reply.status).toBe(415);
        expect(rejected).toEqual([]);
      }
    });

    it('behind express.text(), refuses a body whose charset is not UTF-8 with BODY_UNAVAILABLE and the fix', async () => {
      const { secret, recorder, endpoint, rejected } = await setup('text');
      const body = Buffer.from('{"type":"café"}', 'latin1');
      const message = await signWebhook({ secret, body });
      for (const contentType of ['text/plain; charset=latin1', 'text/plain;charset="ISO-8859-1"', 'application/json; charset=utf-16le']) {
        const reply = await endpoint.send({ headers: { ...message.headers, 'content-type': contentType }, body: new Uint8Array(body) });
        expect(expectEnvelope(reply, 500, 'BODY_UNAVAILABLE')).toBe(BODY_UNAVAILABLE_MESSAGE);
      }
      expect(recorder.runs).toEqual([]);
      expect(rejected).toHaveLength(3);
      // The fix is the hint: in the log, never in the answer.
      for (const error of rejected) expect((error as { hint: string }).hint).toContain("express.raw({ type: '*/*' })");
      // UTF-8, declared or not, is kept as it is.
      for (const contentType of ['text/plain; charset=utf-8', 'text/plain; charset=UTF8', 'text/plain']) {
        const utf8 = await signWebhook({ secret, body: '{"type":"café"}' });
        expectProcessed(await endpoint.send({ headers: { ...utf8.headers, 'content-type': contentType }, body: '{"type":"café"}' }), utf8.id);
      }
    });

    it('reads a body express.json() skipped (another content type) from the stream', async () => {
      const { secret, recorder, endpoint } = await setup('json-first');
      const request = await signed(secret, { type: 'a' });
      expectProcessed(await endpoint.send({ ...request, headers: { ...request.headers, 'content-type': 'text/plain' } }), request.id);
      expect(recorder.runs).toHaveLength(1);
    });

    it('refuses with 500 BODY_UNAVAILABLE, saying how to mount it, when express.json() consumed the body', async () => {
      const { secret, recorder, endpoint, rejected } = await setup('json-first');
      const reply = await endpoint.send(await signed(secret, { type: 'a' }));
      expect(expectEnvelope(reply, 500, 'BODY_UNAVAILABLE')).toBe(BODY_UNAVAILABLE_MESSAGE);
      expect(reply.body).not.toContain('express');
      expect(recorder.runs).toEqual([]);
      expect(rejected).toMatchObject([{ code: 'BODY_UNAVAILABLE' }]);
      const { hint } = rejected[0] as { hint: string };
      expect(hint).toContain('before express.json()');
      expect(hint).toContain(`express.raw({ type: '*/*' })`);
      expect(hint).toContain('req.rawBody = buf');
    });

    it('leaves req.body alone when it read the stream itself', async () => {
      const secret = generateSecret();
      const app = express();
      const seen: unknown[] = [];
      app.post('/hook', webhooks({ secrets: secret }), (req, res) => {
        seen.push(req.body, req.webhook?.text());
        res.sendStatus(204);
      });
      const endpoint = await endpointOf(app);
      open.push(endpoint);
      const request = await signed(secret, { type: 'a' });
      expect((await endpoint.send(request)).status).toBe(204);
      // Express 5 has no req.body without a parser; Express 4 neither.
      expect(seen).toEqual([undefined, request.body]);
    });

  });

  describe(`${label}: a client that left before the middleware ran`, () => {
    const open: Endpoint[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((endpoint) => endpoint.close()));
    });

    it('releases the claim without running the handler when the connection closed while express.raw() read the body', async () => {
      const secret = generateSecret();
      const recorder = new Recorder();
      const store = gatedStore(memoryStore());
      store.open();
      let reached!: () => void;
      const waiting = new Promise<void>((resolve) => (reached = resolve));
      let held = 0;
      const app = express();
      app.post(
        '/hook',
        express.raw({ type: '*/*' }),
        // Holds the first request until its client has gone: by the time webhooks() runs,
        // 'close' was emitted and the body was read.
        (_req, res, next) => {
          if (held++ > 0) return next();
          reached();
          if (res.destroyed) next();
          else res.once('close', () => next());
        },
        webhooks({ secrets: secret, idempotency: { store } }),
        (req, res, next) => {
          recorder.handle(req.webhook, req.webhook?.json()).then(({ status, body }) => void res.status(status).json(body), next);
        },
      );
      const endpoint = await endpointOf(app);
      open.push(endpoint);
      const request = await signed(secret, { type: 'a' });
      await postAndLeave(endpoint.port, '/hook', request.headers, request.body, waiting);
      await vi.waitFor(() => expect(store.releases).toBe(1), { timeout: 3000, interval: 10 });
      expect(recorder.runs).toEqual([]);
      // Released, not held until the lock runs out: the sender's retry is processed.
      expectProcessed(await endpoint.send(request), request.id);
    });
  });

  describe(`${label}: errors`, () => {
    const open: Endpoint[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((endpoint) => endpoint.close()));
    });

    it('completes on a 2xx sent by an error handler, releases on next(error)', async () => {
      const secret = generateSecret();
      const app = express();
      let runs = 0;
      app.post('/hook', webhooks({ secrets: secret }), (_req, _res, next) => {
        runs++;
        next(new Error(runs === 1 ? 'first attempt fails' : 'handled'));
      });
      app.use((error: Error, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
        res.status(error.message === 'handled' ? 202 : 503).json({ note: error.message });
      });
      const endpoint = await endpointOf(app);
      open.push(endpoint);
      const request = await signed(secret, { type: 'a' });
      expect((await endpoint.send(request)).status).toBe(503);
      expect((await endpoint.send(request)).status).toBe(202);
      expectDuplicate(await endpoint.send(request));
      expect(runs).toBe(2);
    });

    it("webhookErrorHandler() answers the package's refusals in the envelope, and passes every other error on", async () => {
      const secret = generateSecret();
      const app = express();
      const thrown: Record<string, () => unknown> = {
        'not-json': () => webhookOf(req0!).json(),
        'webhook-error': () => {
          throw new WebhookError('INVALID_PAYLOAD', 'the order id is not a string');
        },
        permanent: () => {
          throw new PermanentError('no such order');
        },
        'server-fault': () => {
          throw new WebhookError('INVALID_NAMESPACE', 'the namespace function threw');
        },
        'store-lost': () => {
          throw new StoreError('postgres', 'not_ready', 'the connection to PostgreSQL was lost');
        },
        foreign: () => {
          throw new Error('a bug in the route');
        },
        'after-headers': () => {
          res0!.status(200).write('partial');
          throw new PermanentError('too late to answer');
        },
      };
      let req0: express5.Request | undefined;
      let res0: express5.Response | undefined;
      app.post('/hook', webhooks({ secrets: secret }), (req, res) => {
        req0 = req;
        res0 = res;
        thrown[(req.headers['x-case'] as string | undefined) ?? 'foreign']!();
        res.sendStatus(204);
      });
      // A non-async route: Express 4 and 5 both catch its throw and pass it to the error handlers.
      app.use(webhookErrorHandler());
      const passedOn: unknown[] = [];
      app.use((error: Error, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
        passedOn.push(error);
        if (res.headersSent) res.end();
        else res.status(599).type('text/plain').send('the app answered');
      });
      const endpoint = await endpointOf(app);
      open.push(endpoint);
      const send = async (kase: string, body = '{"type":"a"}') => {
        const message = await signWebhook({ secret, body });
        return endpoint.send({ headers: { ...message.headers, ...JSON_TYPE, 'x-case': kase }, body });
      };
      const notJson = await send('not-json', 'not json {');
      expect(expectEnvelope(notJson, 400, 'INVALID_PAYLOAD')).toBe('the payload is not valid JSON');
      expect(expectEnvelope(await send('webhook-error'), 400, 'INVALID_PAYLOAD')).toBe('the order id is not a string');
      expect(expectEnvelope(await send('permanent'), 422, 'PERMANENT_FAILURE')).toBe('no such order');
      // A store that failed under the handler is the store's outage: 503, and the sender retries later.
      const storeLost = await send('store-lost');
      expect(expectEnvelope(storeLost, 503, 'STORE_UNAVAILABLE')).toMatch(/retry later/);
      expect(storeLost.headers['retry-after']).toBeDefined();
      expect(passedOn).toEqual([]);
      // A server fault, a foreign error, and an error after the answer started: the app's handler's.
      expect((await send('server-fault')).body).toBe('the app answered');
      expect((await send('foreign')).body).toBe('the app answered');
      await send('after-headers');
      expect(passedOn).toMatchObject([{ code: 'INVALID_NAMESPACE' }, { message: 'a bug in the route' }, { code: 'PERMANENT_FAILURE' }]);
      expect(webhookErrorHandler().length).toBe(4);
      expect(webhookErrorHandler().name).toBe('webhookErrorHandler');
    });
  });
}

describe('Express: construction and types', () => {
  it('validates options at once and names the middleware after its factory', () => {
    expect(() => webhooks({ secrets: 'not a secret' })).toThrow(TypeError);
    expect(() => webhooks({ secrets: generateSecret(), maxBodyBytes: -1 })).toThrow(RangeError);
    expect(() => webhooks({ secrets: generateSecret(), onRejected: 'log' as never })).toThrow(TypeError);
    expect(webhooks({ secrets: generateSecret() }).name).toBe('webhooks');
  });

  it('types req.webhook in Express 5 and Express 4 handlers', async () => {
    const secret = generateSecret();
    const app5 = express5();
    app5.post('/hook', webhooks({ secrets: secret }), (req, res) => {
      const webhook: VerifiedWebhook | undefined = req.webhook;
      res.json({ id: webhook?.id });
    });
    const app4 = express4();
    app4.post('/hook', webhooks({ secrets: secret }), (req, res) => {
      const webhook: VerifiedWebhook | undefined = req.webhook;
      res.json({ id: webhook?.id });
    });
    for (const app of [app5, app4]) {
      const message = await signed(secret, { type: 'a' });
      const res = await request(app).post('/hook').set(message.headers).send(message.body);
      expect(res.body).toEqual({ id: message.id });
    }
  });
});
