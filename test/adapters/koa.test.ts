/**
 * `webhook-receiver/koa` through real Koa 3 and Koa 2 with @koa/router, over real HTTP: the
 * shared behaviour, each body parser in front (koa-bodyparser, @koa/bodyparser, and co-body,
 * which keeps no raw body), the byte limit while reading, and a client that leaves.
 */

import { createServer } from 'node:http';
import { brotliCompressSync } from 'node:zlib';
import { createRequire } from 'node:module';
import Router from '@koa/router';
import coBody from 'co-body';
import Koa from 'koa';
import Koa2 from 'koa2';
import koaBodyparser from 'koa-bodyparser';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import { webhooks, type WebhookState } from '../../adapters/koa.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { generateSecret } from '../../src/sign.ts';
import {
  adapterConformance,
  BODY_UNAVAILABLE_MESSAGE,
  expectDuplicate,
  expectEnvelope,
  expectProcessed,
  Recorder,
  signed,
  type Endpoint,
  type Outgoing,
  type Reply,
} from './conformance.ts';
import { listen, realHttpBehaviour, type Served } from './node-http.ts';

// Loaded without its types: @koa/bodyparser's declarations add `rawBody: string` to node:http's
// IncomingMessage for the whole program, which contradicts the other adapters' own types.
const { bodyParser: koaBodyParser } = createRequire(import.meta.url)('@koa/bodyparser') as { bodyParser: () => Koa.Middleware };

type KoaClass = typeof Koa;
const VERSIONS: [string, KoaClass][] = [
  ['Koa 3', Koa],
  ['Koa 2', Koa2 as unknown as KoaClass],
];

/** What reads the body before `webhooks()`. */
type Mount = 'none' | 'koa-bodyparser' | '@koa/bodyparser' | 'co-body';

function buildApp(KoaApp: KoaClass, options: AdapterOptions, recorder: Recorder, mount: Mount = 'none'): Koa {
  const app = new KoaApp();
  // Koa logs every error it answers 500 for; the failing handlers here fail on purpose.
  app.silent = true;
  const router = new Router<WebhookState>();
  // The parser runs in front of the router, as apps mount one: the only route is the webhook's.
  if (mount === 'koa-bodyparser') app.use(koaBodyparser());
  else if (mount === '@koa/bodyparser') app.use(koaBodyParser());
  else if (mount === 'co-body') {
    app.use(async (ctx, next) => {
      // A parser that consumes the stream and keeps no raw body.
      (ctx.request as { body?: unknown }).body = await coBody.json(ctx.req);
      await next();
    });
  }
  // `/hook` and any path under it: the rejection-context test sends control characters in the path.
  router.post(/^\/hook(?:\/.*)?$/, webhooks(options), async (ctx) => {
    // With a parser in front, the handler reads its parsed body; otherwise the webhook's.
    const event = mount === 'none' ? ctx.state.webhook.json() : (ctx.request as { body?: unknown }).body;
    const { status, body } = await recorder.handle(ctx.state.webhook, event);
    ctx.status = status;
    ctx.body = body;
  });
  app.use(router.routes());
  return app;
}

async function serve(app: Koa): Promise<Served> {
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- Koa's callback settles every error itself (ctx.onerror): its promise never rejects.
  const server = createServer(app.callback());
  const listening = await listen(server);
  const endpoint: Endpoint = {
    async send({ headers, body, path = '/hook' }: Outgoing): Promise<Reply> {
      // Bytes go as they are (superagent would write a Buffer with a JSON content type as JSON).
      const res = await request(server).post(path).set(headers).serialize((value: unknown) => value as string).send(typeof body === 'string' ? body : Buffer.from(body));
      return { status: res.status, headers: res.headers as Record<string, string>, body: res.text };
    },
    close: listening.close,
  };
  return { endpoint, server, port: listening.port, close: listening.close };
}

for (const [label, KoaApp] of VERSIONS) {
  adapterConformance(label, async (options, recorder) => (await serve(buildApp(KoaApp, options, recorder))).endpoint);
  realHttpBehaviour(label, (options, recorder) => serve(buildApp(KoaApp, options, recorder)), { closesConnection: true });

  describe(`${label}: the raw body and the connection`, () => {
    const open: Served[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((served) => served.close()));
    });

    async function setup(mount: Mount = 'none', options: Partial<AdapterOptions> = {}) {
      const secret = generateSecret();
      const recorder = new Recorder();
      const served = await serve(buildApp(KoaApp, { secrets: secret, onRejected: () => {}, ...options }, recorder, mount));
      open.push(served);
      return { secret, recorder, ...served };
    }

    for (const mount of ['koa-bodyparser', '@koa/bodyparser'] as const) {
      it(`verifies ctx.request.rawBody that ${mount} kept, and the handler reads the parsed body`, async () => {
        const { secret, recorder, endpoint } = await setup(mount);
        const request = await signed(secret, { type: 'invoice.paid', note: 'déjà vu' });
        expectProcessed(await endpoint.send(request), request.id);
        expect(recorder.runs).toMatchObject([{ id: request.id, event: { type: 'invoice.paid', note: 'déjà vu' } }]);
        expectDuplicate(await endpoint.send(request));
      });

      it(`reads the stream itself when ${mount} skipped a type it does not parse`, async () => {
        const { secret, recorder, endpoint } = await setup(mount);
        const request = await signed(secret, { type: 'a' });
        const reply = await endpoint.send({ ...request, headers: { ...request.headers, 'content-type': 'application/octet-stream' } });
        expect(reply.status, reply.body).toBe(200);
        expect(recorder.runs.map((run) => run.id)).toEqual([request.id]);
      });

      it(`refuses a br body that ${mount} decoded: 415 UNSUPPORTED_ENCODING, as every adapter does`, async () => {
        const { secret, recorder, endpoint } = await setup(mount);
        const request = await signed(secret, { type: 'a' });
        const reply = await endpoint.send({ ...request, headers: { ...request.headers, 'content-encoding': 'br' }, body: new Uint8Array(brotliCompressSync(request.body)) });
        expect(expectEnvelope(reply, 415, 'UNSUPPORTED_ENCODING')).toBe(
          'content-encoding "br" is not supported: send the body as is, or compressed once with gzip or deflate',
        );
        expect(recorder.runs).toEqual([]);
      });
    }

    it('answers BODY_UNAVAILABLE with the fix when a parser consumed the stream without keeping it', async () => {
      const rejected: { hint?: string }[] = [];
      const { secret, recorder, endpoint } = await setup('co-body', { onRejected: (error) => rejected.push(error) });
      const request = await signed(secret, { type: 'a' });
      expect(expectEnvelope(await endpoint.send(request), 500, 'BODY_UNAVAILABLE')).toBe(BODY_UNAVAILABLE_MESSAGE);
      // The fix is the hint: in the log, never in the answer.
      expect(rejected[0]?.hint).toMatch(/mount webhooks\(\) before the body parser/);
      expect(rejected[0]?.hint).toMatch(/ctx\.request\.rawBody \(koa-bodyparser or @koa\/bodyparser/);
      expect(recorder.runs).toEqual([]);
    });

    it('tells onRejected the path as sent when a mounting middleware rewrote ctx.path (koa-mount)', async () => {
      const app = new KoaApp();
      app.silent = true;
      const contexts: unknown[] = [];
      // What koa-mount does for app.use(mount('/billing', inner)): strips its prefix from ctx.path.
      app.use(async (ctx, next) => {
        ctx.path = ctx.path.slice('/billing'.length);
        await next();
      });
      app.use(webhooks({ secrets: generateSecret(), onRejected: (_error, context) => contexts.push(context) }));
      const served = await serve(app);
      open.push(served);
      const request = await signed(generateSecret(), { type: 'a' });
      expectEnvelope(await served.endpoint.send({ ...request, path: '/billing/hook?token=s3cr3t' }), 401, 'SIGNATURE_MISMATCH');
      expect(contexts).toEqual([{ method: 'POST', path: '/billing/hook', webhookId: request.id }]);
    });

    it('releases the claim when no route answers (Koa’s default 404)', async () => {
      const secret = generateSecret();
      const app = new KoaApp();
      app.silent = true;
      let runs = 0;
      app.use(webhooks({ secrets: secret, onRejected: () => {} }));
      app.use(async (ctx, next) => {
        runs++;
        // The first delivery falls through to nobody; the second is answered.
        if (runs === 1) return next();
        ctx.status = 204;
      });
      const served = await serve(app);
      open.push(served);
      const request = await signed(secret, { type: 'a' });
      expect((await served.endpoint.send(request)).status).toBe(404);
      expect((await served.endpoint.send(request)).status).toBe(204);
      expectDuplicate(await served.endpoint.send(request));
      expect(runs).toBe(2);
    });
  });
}

describe('Koa types', () => {
  it('types ctx.state.webhook on routes of a Router<WebhookState> only', () => {
    const typed = new Router<WebhookState>();
    typed.post('/a', webhooks({ secrets: generateSecret() }), (ctx) => {
      const id: string = ctx.state.webhook.id;
      const signal: AbortSignal = ctx.state.webhookContext.signal;
      ctx.body = { id, aborted: signal.aborted };
    });
    const plain = new Router<{ user: string }>();
    plain.post('/b', (ctx) => {
      // @ts-expect-error not a webhook route: its state has no webhook
      ctx.body = ctx.state.webhook.id;
    });
    expect(typed.stack).toHaveLength(1);
  });
});
