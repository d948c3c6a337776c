import { describe, expect, it } from 'vitest';
import { webhookHandler } from '../../adapters/fetch.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { generateSecret } from '../../src/sign.ts';
import {
  adapterConformance,
  BODY_UNAVAILABLE_MESSAGE,
  bodyInit,
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
import { realHttpBehaviour, servedFetch } from './node-http.ts';

async function replyOf(res: Response): Promise<Reply> {
  return { status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
}

function requestOf({ headers, body, path = '/hook' }: Outgoing): Request {
  return new Request(`https://receiver.example${path}`, { method: 'POST', headers, body: bodyInit(body) });
}

/** Calls the handler with a real Request; a rethrown error becomes the 500 a platform would send. */
function endpointOf(handle: (request: Request) => Promise<Response>): Endpoint {
  return {
    async send(outgoing: Outgoing): Promise<Reply> {
      try {
        return await replyOf(await handle(requestOf(outgoing)));
      } catch {
        return { status: 500, headers: {}, body: 'Internal Server Error' };
      }
    },
    close: async () => undefined,
  };
}

function build(options: AdapterOptions, recorder: Recorder): (request: Request) => Promise<Response> {
  return webhookHandler(options, async (webhook) => {
    const { status, body } = await recorder.handle(webhook, webhook.json());
    return Response.json(body, { status });
  });
}

adapterConformance('Fetch', async (options, recorder) => endpointOf(build(options, recorder)));
// On Node, through @hono/node-server: a declared-length body is read whole with arrayBuffer(), a
// chunked one chunk by chunk (src/body.ts), and both must hold over a real connection.
adapterConformance('Fetch (@hono/node-server, real HTTP)', async (options, recorder) => (await servedFetch(build(options, recorder))).endpoint);
realHttpBehaviour('Fetch (@hono/node-server)', (options, recorder) => servedFetch(build(options, recorder)), { closesConnection: false });

describe('Fetch: the handler', () => {
  it('returns the handler’s Response as it is, and 204 for nothing', async () => {
    const secret = generateSecret();
    const custom = webhookHandler({ secrets: secret }, () => new Response('queued', { status: 202, headers: { 'x-queue': 'billing' } }));
    const request = await signed(secret, { type: 'a' });
    const res = await custom(requestOf(request));
    expect([res.status, res.headers.get('x-queue'), await res.text()]).toEqual([202, 'billing', 'queued']);
    expectDuplicate(await replyOf(await custom(requestOf(request))));

    const runs: string[] = [];
    const silent = webhookHandler({ secrets: secret }, (webhook) => void runs.push(webhook.id));
    const second = await signed(secret, { type: 'a' });
    const empty = await silent(requestOf(second));
    expect([empty.status, await empty.text()]).toEqual([204, '']);
    // 204 is a 2xx: the claim was completed.
    expectDuplicate(await replyOf(await silent(requestOf(second))));
    expect(runs).toEqual([second.id]);
  });

  it('releases the claim and rethrows the handler’s error, so the platform logs it and the sender retries', async () => {
    const secret = generateSecret();
    const failure = new Error('database unavailable');
    let runs = 0;
    const handle = webhookHandler({ secrets: secret }, (webhook) => {
      runs++;
      if (runs === 1) throw failure;
      return Response.json({ id: webhook.id });
    });
    const request = await signed(secret, { type: 'a' });
    await expect(handle(requestOf(request))).rejects.toBe(failure);
    const retry = await handle(requestOf(request));
    expect(await retry.json()).toEqual({ id: request.id });
    expectDuplicate(await replyOf(await handle(requestOf(request))));
    expect(runs).toBe(2);
  });

  it('refuses a handler result that is not a Response with a TypeError, and releases the claim', async () => {
    const secret = generateSecret();
    let runs = 0;
    const handle = webhookHandler({ secrets: secret }, () => {
      runs++;
      return (runs === 1 ? { ok: true } : undefined) as unknown as Response;
    });
    const request = await signed(secret, { type: 'a' });
    await expect(handle(requestOf(request))).rejects.toThrow(new TypeError('the webhook handler must return a Response or nothing, got object'));
    expect((await handle(requestOf(request))).status).toBe(204);
    expect(runs).toBe(2);
  });

  it('completes the claim when the handler succeeded after the client left (request.signal aborted), so the retry is a duplicate', async () => {
    const secret = generateSecret();
    const client = new AbortController();
    const runs: string[] = [];
    const handle = webhookHandler({ secrets: secret }, (webhook) => {
      runs.push(webhook.id);
      // The platform aborts the signal when the connection closes (a sender that timed out);
      // here, while the handler works.
      if (runs.length === 1) client.abort();
      return Response.json({ id: webhook.id });
    });
    const request = await signed(secret, { type: 'a' });
    const first = new Request('https://receiver.example/hook', { method: 'POST', headers: request.headers, body: request.body, signal: client.signal });
    expect((await handle(first)).status).toBe(200);
    // The sender's retry must not run a handler that succeeded: it is answered as a duplicate.
    expectDuplicate(await replyOf(await handle(requestOf(request))));
    expect(runs).toEqual([request.id]);
  });

  it('releases the claim when the handler failed after the client left, so the retry runs it', async () => {
    const secret = generateSecret();
    const client = new AbortController();
    const runs: string[] = [];
    const handle = webhookHandler({ secrets: secret }, (webhook) => {
      runs.push(webhook.id);
      if (runs.length === 1) {
        client.abort();
        return new Response('upstream down', { status: 502 });
      }
      return Response.json({ id: webhook.id });
    });
    const request = await signed(secret, { type: 'a' });
    const first = new Request('https://receiver.example/hook', { method: 'POST', headers: request.headers, body: request.body, signal: client.signal });
    expect((await handle(first)).status).toBe(502);
    const retry = await handle(requestOf(request));
    expect([retry.status, await retry.json()]).toEqual([200, { id: request.id }]);
    expect(runs).toEqual([request.id, request.id]);
  });

  it('does not call the handler when the client already left, and releases the claim', async () => {
    const secret = generateSecret();
    const runs: string[] = [];
    const handle = webhookHandler({ secrets: secret }, (webhook) => void runs.push(webhook.id));
    const request = await signed(secret, { type: 'a' });
    const gone = new Request('https://receiver.example/hook', { method: 'POST', headers: request.headers, body: request.body, signal: AbortSignal.abort() });
    const res = await handle(gone);
    expect([res.status, await res.text()]).toEqual([499, '']);
    expect(runs).toEqual([]);
    expect((await handle(requestOf(request))).status).toBe(204);
    expect(runs).toEqual([request.id]);
  });

  it("on @hono/node-server, reads the headers and the client's state from Node's own request and response", async () => {
    const secret = generateSecret();
    const runs: string[] = [];
    const handle = webhookHandler({ secrets: secret }, (webhook) => void runs.push(webhook.id));
    const request = await signed(secret, { type: 'a' });
    const body = typeof request.body === 'string' ? request.body : Buffer.from(request.body).toString();
    const nodeHeaders = { ...Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name.toLowerCase(), value])), 'content-length': String(Buffer.byteLength(body)) };
    // The Request carries no webhook headers at all: only Node's header object can verify it.
    const bare = () => new Request('https://receiver.example/hook', { method: 'POST', body });
    const gone = await handle(bare(), { incoming: { headers: nodeHeaders }, outgoing: { destroyed: true } });
    expect([gone.status, runs]).toEqual([499, []]);
    const served = await handle(bare(), { incoming: { headers: nodeHeaders }, outgoing: { destroyed: false } });
    expect([served.status, runs]).toEqual([204, [request.id]]);
    // Anything else in that place (a Worker's env, say) is not taken for them.
    const unsigned = await handle(bare(), { incoming: { headers: 'x' }, outgoing: { destroyed: false } });
    expect(unsigned.status).toBe(400);
  });

  it('passes the request to the handler, with its body consumed', async () => {
    const secret = generateSecret();
    const seen: unknown[] = [];
    const handle = webhookHandler({ secrets: secret }, (webhook, request) => {
      seen.push(request.url, request.headers.get('webhook-id'), request.bodyUsed, webhook.json());
    });
    const request = await signed(secret, { type: 'a' });
    expect((await handle(requestOf({ ...request, path: '/api/webhooks?x=1' }))).status).toBe(204);
    expect(seen).toEqual(['https://receiver.example/api/webhooks?x=1', request.id, true, { type: 'a' }]);
  });

  it('refuses with 500 BODY_UNAVAILABLE when the body was read before the handler got it', async () => {
    const secret = generateSecret();
    const rejected: unknown[] = [];
    const handle = webhookHandler({ secrets: secret, onRejected: (error) => rejected.push(error) }, () => undefined);
    const request = requestOf(await signed(secret, { type: 'a' }));
    await request.json();
    const message = expectEnvelope(await replyOf(await handle(request)), 500, 'BODY_UNAVAILABLE');
    expect(message).toBe(BODY_UNAVAILABLE_MESSAGE);
    // The fix is the hint: in the log, never in the answer.
    expect(rejected).toMatchObject([{ code: 'BODY_UNAVAILABLE', hint: expect.stringContaining('webhook.json()') }]);
  });

  it('stops reading a streamed body at maxBodyBytes: 413, and the rest is never pulled', async () => {
    const limit = 64 * 1024;
    const secret = generateSecret();
    const handle = webhookHandler({ secrets: secret, maxBodyBytes: limit, onRejected: () => {} }, () => undefined);
    const { headers } = await signed(secret, { type: 'a' });
    const chunk = new Uint8Array(16 * 1024).fill(0x61);
    let pulled = 0;
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          // Bounded: an endless upload, as far as the reader is concerned, stops at 64 MiB.
          if (pulled >= 64 * 1024 * 1024) return controller.close();
          pulled += chunk.byteLength;
          controller.enqueue(chunk);
        },
        cancel() {
          cancelled = true;
        },
      },
      { highWaterMark: 0 },
    );
    const request = new Request('https://receiver.example/hook', { method: 'POST', headers: { ...headers, ...JSON_TYPE }, body, duplex: 'half' } as RequestInit);
    const reply = await replyOf(await handle(request));
    expectEnvelope(reply, 413, 'PAYLOAD_TOO_LARGE');
    expect(pulled).toBeGreaterThan(limit);
    expect(pulled).toBeLessThanOrEqual(limit + 2 * chunk.byteLength);
    expect(cancelled).toBe(true);
  });

  it('processes a webhook end to end with a Request built the way platforms build them', async () => {
    const secret = generateSecret();
    const recorder = new Recorder();
    const handle = build({ secrets: secret }, recorder);
    const request = await signed(secret, { type: 'a' });
    const bytes = new TextEncoder().encode(request.body);
    expectProcessed(await replyOf(await handle(requestOf({ ...request, body: bytes }))), request.id);
    expect(recorder.runs).toMatchObject([{ id: request.id, event: { type: 'a' } }]);
  });
});

describe('Fetch: construction and portability', () => {
  it('validates options and the handler at once, and names the handler after its factory', () => {
    expect(() => webhookHandler({ secrets: 'not a secret' }, () => undefined)).toThrow(TypeError);
    expect(() => webhookHandler({ secrets: generateSecret() }, undefined as never)).toThrow(
      new TypeError('webhookHandler needs a handler function: webhookHandler(options, (webhook, request, context) => …)'),
    );
    expect(webhookHandler({ secrets: generateSecret() }, () => undefined).name).toBe('webhookHandler');
  });
});
