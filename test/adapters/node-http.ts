/**
 * Real HTTP on 127.0.0.1 for what a simulated request cannot show: an upload refused part-way,
 * and a client that leaves while its webhook is handled. Helpers, then a suite that the Express,
 * Fastify and Hono (@hono/node-server) tests run.
 */

import { once } from 'node:events';
import { request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AdapterOptions } from '../../src/http.ts';
import { generateSecret } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import {
  bodyInit,
  expectDuplicate,
  expectInProgress,
  expectProcessed,
  gatedStore,
  JSON_TYPE,
  Recorder,
  signed,
  type Endpoint,
  type Outgoing,
  type Reply,
} from './conformance.ts';

/** One POST over real HTTP to 127.0.0.1, its answer as the conformance tests read it. */
export async function postOverHttp(port: number, path: string, headers: Record<string, string>, body: string): Promise<Reply> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers, body });
  return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
}

/** Listens on 127.0.0.1 and records, per socket, how many bytes the server read from it. */
export async function listen(server: Server): Promise<{ port: number; bytesRead(): number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => sockets.add(socket));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    port,
    bytesRead: () => [...sockets].reduce((sum, socket) => sum + socket.bytesRead, 0),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A Fetch handler (a Hono app's `fetch`, or this package's Fetch handler) on @hono/node-server,
 * over real HTTP on 127.0.0.1.
 */
export async function servedFetch(handle: (request: Request) => Response | Promise<Response>): Promise<Served> {
  const server = createAdaptorServer({ fetch: handle }) as Server;
  const listening = await listen(server);
  const endpoint: Endpoint = {
    async send({ headers, body, path = '/hook' }: Outgoing) {
      const res = await fetch(`http://127.0.0.1:${listening.port}${path}`, { method: 'POST', headers, body: bodyInit(body) });
      return { status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
    },
    close: listening.close,
  };
  return { server, port: listening.port, endpoint, close: listening.close };
}

export interface StreamedReply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** Body bytes the client managed to hand to its socket before the answer came. */
  written: number;
}

/**
 * POSTs a chunked body of up to `total` bytes as fast as the server takes it, and stops writing
 * as soon as the server answers. Bounded: gives up after `timeoutMs`.
 */
export async function streamUpload(
  port: number,
  path: string,
  headers: Record<string, string>,
  { total, chunkBytes = 16 * 1024, timeoutMs = 10_000 }: { total: number; chunkBytes?: number; timeoutMs?: number },
): Promise<StreamedReply> {
  const client = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', headers: { ...headers, 'transfer-encoding': 'chunked' } });
  client.on('error', () => {
    // The server closes the connection after refusing the upload; writes after that fail.
  });
  let answered = false;
  const response = new Promise<StreamedReply>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    client.once('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), written });
      });
      res.once('error', reject);
    });
  });
  const chunk = Buffer.alloc(chunkBytes, 0x61);
  let written = 0;
  const stopped = response.then(() => undefined, () => undefined);
  while (!answered && written < total && !client.destroyed) {
    written += chunk.byteLength;
    if (!client.write(chunk)) await Promise.race([once(client, 'drain'), stopped]);
  }
  if (!answered && !client.destroyed) client.end();
  try {
    return await response;
  } finally {
    client.destroy();
  }
}

/** POSTs `body` and leaves (destroys the socket) once `leaveWhen` resolves. */
export async function postAndLeave(port: number, path: string, headers: Record<string, string>, body: string, leaveWhen: Promise<void>): Promise<void> {
  const client = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } });
  client.on('error', () => {
    // Expected: the socket is destroyed before the answer.
  });
  client.end(body);
  await leaveWhen;
  client.destroy();
}

/** Sends headers declaring a `declared`-byte body, none of the body, and waits for the answer. */
export function declareAndWait(port: number, path: string, headers: Record<string, string>, declared: number, timeoutMs = 5000): Promise<StreamedReply> {
  return new Promise((resolve, reject) => {
    const client = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', headers: { ...headers, 'content-length': String(declared) } });
    const timer = setTimeout(() => {
      client.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    client.on('error', reject);
    client.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), written: 0 });
        client.destroy();
      });
    });
    client.flushHeaders();
  });
}

// ---------------------------------------------------------------------------------------------
// The suite

/** An app served over real HTTP on 127.0.0.1. */
export interface Served {
  server: Server;
  port: number;
  endpoint: Endpoint;
  close(): Promise<void>;
}

/**
 * What only real HTTP shows: an upload refused at the declared length or part-way through, and
 * a client that leaves. `frameworkReadsBody`: the framework's own body parser reads (and limits)
 * every body before the adapter sees it (NestJS), so the byte-limit cases are its, not ours.
 */
export function realHttpBehaviour(
  label: string,
  serve: (options: AdapterOptions, recorder: Recorder) => Promise<Served>,
  { closesConnection, frameworkReadsBody = false }: { closesConnection: boolean; frameworkReadsBody?: boolean },
): void {
  describe(`${label}: over real HTTP`, () => {
    const open: Served[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((served) => served.close()));
    });

    async function setup(options: Partial<AdapterOptions> = {}) {
      const secret = generateSecret();
      const recorder = new Recorder();
      const served = await serve({ secrets: secret, onRejected: () => {}, ...options }, recorder);
      open.push(served);
      return { secret, recorder, ...served };
    }

    it.skipIf(frameworkReadsBody)('verifies a body that arrives in many chunks', async () => {
      const { secret, recorder, endpoint } = await setup();
      const request = await signed(secret, { type: 'a', padding: 'é'.repeat(200_000) });
      expect(Buffer.byteLength(request.body)).toBeGreaterThan(400_000);
      expectProcessed(await endpoint.send(request), request.id);
      expect(recorder.runs).toMatchObject([{ id: request.id, event: { type: 'a' } }]);
      expectDuplicate(await endpoint.send(request));
    });

    it.skipIf(frameworkReadsBody)('refuses a declared oversize body at once, before it is sent', async () => {
      const limit = 64 * 1024;
      const { secret, recorder, port } = await setup({ maxBodyBytes: limit });
      const { headers } = await signed(secret, { type: 'a' });
      // Declares 100 MB and sends none of it: only an answer before the body can arrive in time.
      const reply = await declareAndWait(port, '/hook', headers, 100 * 1024 * 1024);
      expect(reply.status).toBe(413);
      if (closesConnection) expect(reply.headers.connection).toBe('close');
      expect(JSON.parse(reply.body)).toEqual({ error: 'PAYLOAD_TOO_LARGE', message: `request body is ${100 * 1024 * 1024} bytes, over the limit of ${limit} bytes (maxBodyBytes)` });
      expect(recorder.runs).toEqual([]);
    });

    it.skipIf(frameworkReadsBody)('stops reading a streamed upload at maxBodyBytes: 413, and not much more was read', async () => {
      const limit = 64 * 1024;
      const { secret, recorder, port, server } = await setup({ maxBodyBytes: limit });
      let readAtAnswer = 0;
      server.prependListener('request', (req, res) => res.once('finish', () => (readAtAnswer = req.socket.bytesRead)));
      const { headers } = await signed(secret, { type: 'a' });
      const total = 32 * 1024 * 1024;
      const reply = await streamUpload(port, '/hook', { ...headers, ...JSON_TYPE }, { total });
      expect(reply.status).toBe(413);
      if (closesConnection) expect(reply.headers.connection).toBe('close');
      expect(JSON.parse(reply.body)).toEqual({ error: 'PAYLOAD_TOO_LARGE', message: `request body is more than the limit of ${limit} bytes (maxBodyBytes)` });
      // Reads from the socket stop once the paused request's buffer is full: the server read the
      // limit plus a few socket reads (about 115 KB for a 64 KiB limit), not the upload.
      expect(readAtAnswer).toBeGreaterThan(limit);
      expect(readAtAnswer).toBeLessThan(limit + 256 * 1024);
      expect(reply.written).toBeLessThan(total);
      expect(recorder.runs).toEqual([]);
    });

    it('survives a client that leaves mid-upload: nothing claimed, nothing run', async () => {
      const { secret, recorder, port, endpoint, server } = await setup();
      const request = await signed(secret, { type: 'a' });
      // The client leaves once the server has the request, never before: a timer here (it was
      // 50 ms) let a loaded machine destroy the socket before the server parsed the headers, so no
      // 'request' event ever came and the test waited for a 'close' that could not happen.
      let closed!: Promise<void>;
      const received = new Promise<void>((resolve) =>
        server.once('request', (req) => {
          closed = new Promise<void>((done) => req.once('close', () => done()));
          resolve();
        }),
      );
      const client = httpRequest({ host: '127.0.0.1', port, path: '/hook', method: 'POST', headers: { ...request.headers, 'content-length': '100000' } });
      client.on('error', () => {
        // Expected: the client destroys its own socket.
      });
      client.write(request.body);
      await received;
      client.destroy();
      await closed;
      expectProcessed(await endpoint.send(request), request.id);
      expect(recorder.runs.map((run) => run.id)).toEqual([request.id]);
    });

    // A sender that times out retries. Success is what counts, not the connection: a
    // handler that answers 2xx after its client left completes the claim, so the retry is a
    // duplicate; one that fails releases it, so the retry runs it again. Never two at once.
    for (const first of ['wait', 'wait-throw'] as const) {
      const succeeds = first === 'wait';
      it(`keeps the claim while the handler runs after the client left, then ${succeeds ? 'completes it when the handler answers 2xx' : 'releases it when the handler fails'}`, async () => {
        const { secret, recorder, port, endpoint, server } = await setup();
        const request = await signed(secret, { type: 'a', first });
        const closed = new Promise<void>((resolve) => server.once('request', (_req, res) => res.once('close', () => resolve())));
        await postAndLeave(port, '/hook', request.headers, request.body, recorder.entered);
        await closed;
        // The server saw the client leave, but the handler is still working: a retry now must
        // not run it alongside.
        expectInProgress(await endpoint.send(request));
        recorder.open();
        if (succeeds) {
          // Its answer reached nobody, but it succeeded: the retry is answered as a duplicate.
          await vi.waitFor(async () => expectDuplicate(await endpoint.send(request)), { timeout: 10_000, interval: 25 });
          expect(recorder.runs.map((run) => run.id)).toEqual([request.id]);
        } else {
          await vi.waitFor(async () => expectProcessed(await endpoint.send(request), request.id), { timeout: 10_000, interval: 25 });
          expectDuplicate(await endpoint.send(request));
          expect(recorder.runs.map((run) => run.id)).toEqual([request.id, request.id]);
        }
        expect(recorder.maxActive).toBe(1);
      });
    }

    it('releases a claim taken after the client already left, without running the handler', async () => {
      const store = gatedStore(memoryStore());
      const { secret, recorder, port, endpoint, server } = await setup({ idempotency: { store } });
      const request = await signed(secret, { type: 'a' });
      // The claim goes on once the server saw the client leave (an event, not a timer that a
      // loaded machine can outrun).
      const closed = new Promise<void>((resolve) => server.once('request', (_req, res) => res.once('close', () => resolve())));
      await postAndLeave(port, '/hook', request.headers, request.body, store.claiming);
      await closed;
      store.open();
      await vi.waitFor(() => expect(store.releases).toBe(1), { timeout: 3000, interval: 10 });
      expect(recorder.runs).toEqual([]);
      expectProcessed(await endpoint.send(request), request.id);
    });
  });
}
