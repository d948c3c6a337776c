/**
 * A body over `maxBodyBytes` is refused with 413 after reading about that many bytes, in every
 * adapter that reads the request stream: Express (no body parser before it: it reads the stream
 * itself), Fastify (its own content parser), Hono on @hono/node-server, and the Fetch handler on
 * @hono/node-server. Over real HTTP on 127.0.0.1, a client uploads 100 times the limit as fast as
 * the server takes it, without `content-length` (chunked) so that only reading can find the size.
 *
 * Measured on the server: the bytes its sockets read, when the answer went out and again after
 * the connection settled (a server that answers and then drains the upload to keep the
 * connection alive would read all of it). A second case declares the size in `content-length`:
 * refused before any of the body is read.
 */

import { once } from 'node:events';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { webhooks as expressWebhooks } from '../../adapters/express.ts';
import { webhooks as fastifyWebhooks } from '../../adapters/fastify.ts';
import { webhookHandler } from '../../adapters/fetch.ts';
import { webhooks as honoWebhooks } from '../../adapters/hono.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { signWebhook } from '../../src/sign.ts';
import { declareAndWait, listen, streamUpload } from '../adapters/node-http.ts';
import { freshSecret } from '../fuzz/support.ts';

const LIMIT = 64 * 1024;
const UPLOAD = 100 * LIMIT;
/**
 * How far past the limit reading may go: Node reads a socket in chunks of up to 64 KiB and keeps
 * a paused request's buffer full (64 KiB from Node 22 on, 16 KiB before), and @hono/node-server's
 * Web stream over the request queues a little more, so a few reads beyond the limit are in flight
 * when the adapter stops (measured on Node 26: 381 KiB read in all for Hono and the Fetch handler
 * on @hono/node-server). Anything near the upload's size (6 400 KiB) is a failure.
 */
const SLACK = 512 * 1024;

const { secret } = freshSecret(32);
const options: AdapterOptions = { secrets: secret, maxBodyBytes: LIMIT, onRejected: () => {} };
let handled = 0;

async function expressServer(): Promise<Server> {
  const { default: express } = await import('express');
  const app = express();
  app.post('/webhooks', expressWebhooks(options), (_req, res) => void (handled++, res.status(204).end()));
  return createServer(app);
}

async function fastifyServer(): Promise<Server> {
  const { default: Fastify } = await import('fastify');
  const app = Fastify();
  await app.register(async (scope) => {
    await scope.register(fastifyWebhooks, options);
    scope.post('/webhooks', async (_request, reply) => (handled++, reply.code(204).send()));
  });
  await app.ready();
  return app.server;
}

async function honoServer(): Promise<Server> {
  const { Hono } = await import('hono');
  const { createAdaptorServer } = await import('@hono/node-server');
  const app = new Hono();
  app.post('/webhooks', honoWebhooks(options), (c) => (handled++, c.body(null, 204)));
  return createAdaptorServer({ fetch: app.fetch }) as Server;
}

async function fetchServer(): Promise<Server> {
  const { createAdaptorServer } = await import('@hono/node-server');
  const handler = webhookHandler(options, () => (handled++, new Response(null, { status: 204 })));
  return createAdaptorServer({ fetch: handler }) as Server;
}

/**
 * A hostile client: uploads `total` bytes chunked and keeps writing after the answer, until it is
 * all sent or the server closes the connection. Bounded by `timeoutMs`.
 */
async function uploadIgnoringAnswer(port: number, headers: Record<string, string>, total: number, timeoutMs = 10_000): Promise<{ status: number }> {
  const client = httpRequest({ host: '127.0.0.1', port, path: '/webhooks', method: 'POST', headers: { ...headers, 'transfer-encoding': 'chunked' } });
  let status = 0;
  let closed = false;
  client.on('response', (res) => {
    status = res.statusCode ?? 0;
    res.resume();
  });
  client.on('error', () => (closed = true));
  client.on('close', () => (closed = true));
  const chunk = Buffer.alloc(16 * 1024, 0x61);
  const deadline = Date.now() + timeoutMs;
  let written = 0;
  while (written < total && !closed && Date.now() < deadline) {
    written += chunk.byteLength;
    // `once` rejects on 'error' (EPIPE once the server closed): that ends the upload too. The
    // waits that lose the race are aborted, so no listener is left behind on the request.
    if (!client.write(chunk)) {
      const settled = new AbortController();
      const { signal } = settled;
      await Promise.race([once(client, 'drain', { signal }), once(client, 'close', { signal }), delay(1000, undefined, { signal })]).catch(() => undefined);
      settled.abort();
    }
  }
  if (!closed) client.end();
  await new Promise((resolve) => setTimeout(resolve, 100));
  client.destroy();
  return { status };
}

interface Measured {
  /** Bytes read by the time the 413 went out (chunked upload). */
  atAnswer: number;
  /** Once settled, after a client that stops at the answer. */
  settled: number;
  /** Once settled, after a client that keeps sending. */
  hostile: number;
  /** With the size declared in content-length. */
  declared: number;
}
const measured: Record<string, Partial<Measured>> = {};

afterAll(() => {
  console.log(
    `[limits] ${UPLOAD}-byte uploads against a ${LIMIT}-byte limit; bytes the server read ` +
      '(at the 413 / settled, client stops at the answer / settled, client keeps sending / size declared in content-length): ' +
      Object.entries(measured)
        .map(([name, m]) => `${name} ${m.atAnswer} / ${m.settled} / ${m.hostile} / ${m.declared}`)
        .join('; '),
  );
});

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each([
  ['Express', expressServer],
  ['Fastify', fastifyServer],
  ['Hono on @hono/node-server', honoServer],
  ['Fetch handler on @hono/node-server', fetchServer],
] as const)('%s', (name, make) => {
  /** Serves a fresh app on 127.0.0.1 for one test, with signed headers for a small body. */
  async function withServer(test: (served: Awaited<ReturnType<typeof listen>>, server: Server, headers: Record<string, string>) => Promise<void>): Promise<void> {
    const server = await make();
    const served = await listen(server);
    try {
      const { headers } = await signWebhook({ secret, body: '{}' });
      await test(served, server, { ...headers, 'content-type': 'application/json' });
      expect(handled).toBe(0);
    } finally {
      await served.close();
    }
  }
  const m: Partial<Measured> = (measured[name] = {});

  it('refuses a chunked upload of 100× maxBodyBytes with 413 after reading about maxBodyBytes', () =>
    withServer(async (served, server, headers) => {
      let atAnswer = -1;
      server.prependListener('request', (req, res) => res.once('finish', () => (atAnswer = req.socket.bytesRead)));
      const reply = await streamUpload(served.port, '/webhooks', headers, { total: UPLOAD });
      expect(reply.status).toBe(413);
      expect(JSON.parse(reply.body)).toEqual({ error: 'PAYLOAD_TOO_LARGE', message: `request body is more than the limit of ${LIMIT} bytes (maxBodyBytes)` });
      expect(reply.written).toBeLessThan(UPLOAD);
      // Settled: the server closed the connection, or stayed idle for half a second.
      await settle(500);
      Object.assign(m, { atAnswer, settled: served.bytesRead() });
      expect(atAnswer).toBeGreaterThan(LIMIT);
      expect(atAnswer).toBeLessThan(LIMIT + SLACK);
      expect(served.bytesRead(), 'bytes read after the answer: the rest of the upload must not be drained').toBeLessThan(LIMIT + SLACK);
    }));

  it('stops reading when the client keeps sending after the 413', () =>
    withServer(async (served, _server, headers) => {
      const { status } = await uploadIgnoringAnswer(served.port, headers, UPLOAD);
      expect(status).toBe(413);
      await settle(700);
      m.hostile = served.bytesRead();
      expect(served.bytesRead(), 'the server drained the rest of the upload').toBeLessThan(LIMIT + SLACK);
    }));

  it('refuses a body declared over the limit in content-length before reading any of it', () =>
    withServer(async (served, _server, headers) => {
      const reply = await declareAndWait(served.port, '/webhooks', headers, UPLOAD);
      expect(reply.status).toBe(413);
      expect(JSON.parse(reply.body)).toEqual({ error: 'PAYLOAD_TOO_LARGE', message: `request body is ${UPLOAD} bytes, over the limit of ${LIMIT} bytes (maxBodyBytes)` });
      // Only the request head was sent and read.
      m.declared = served.bytesRead();
      expect(served.bytesRead()).toBeLessThan(1024);
    }));
});
