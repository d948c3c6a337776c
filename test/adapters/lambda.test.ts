/**
 * `webhook-receiver/lambda` with the event payloads AWS documents for each source (fixtures in
 * test/fixtures/lambda/), invoked as the Node.js runtime invokes a handler: the event as parsed
 * JSON, a context with `getRemainingTimeInMillis()`, the awaited result serialised to JSON.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type {
  ALBEvent,
  ALBResult,
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyResult,
  APIGatewayProxyResultV2,
  Context,
  Handler,
  LambdaFunctionURLEvent,
  LambdaFunctionURLResult,
} from 'aws-lambda';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { webhookHandler, type LambdaContextLike, type LambdaHttpEvent, type LambdaHttpResult, type LambdaWebhookContext } from '../../adapters/lambda.ts';
import type { AdapterOptions } from '../../src/http.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { IdempotencyStore } from '../../src/stores/types.ts';
import type { VerifiedWebhook } from '../../src/verify.ts';
import { adapterConformance, type Endpoint, type Outgoing, type Recorder, type Reply } from './conformance.ts';

const FIXTURES = join(import.meta.dirname, '../fixtures/lambda');
type Source = 'rest' | 'http' | 'url' | 'alb' | 'alb-multi';
const FILES: Record<Source, string> = {
  rest: 'api-gateway-rest.json',
  http: 'http-api.json',
  url: 'function-url.json',
  alb: 'alb.json',
  'alb-multi': 'alb-multi-value.json',
};
const SOURCES = Object.keys(FILES) as Source[];

function fixture(source: Source): Record<string, unknown> {
  return JSON.parse(readFileSync(join(FIXTURES, FILES[source]), 'utf8')) as Record<string, unknown>;
}

/**
 * The fixture for `source` carrying `body` and `headers` the way that source delivers them:
 * REST keeps the sender's case and sends `headers` (last value) and `multiValueHeaders` (all);
 * HTTP APIs and function URLs lower-case names and join repeated values with commas; ALB sends
 * the last value, or every value in `multiValueHeaders` when the target group has them on.
 */
function eventFor(source: Source, headers: Record<string, string | string[]>, body: string | Uint8Array, base64 = typeof body !== 'string'): LambdaHttpEvent {
  const event = fixture(source);
  const all = (value: string | string[]): string[] => (Array.isArray(value) ? value : [value]);
  const single = event.headers as Record<string, string> | undefined;
  const multi = event.multiValueHeaders as Record<string, string[]> | undefined;
  for (const [name, value] of Object.entries(headers)) {
    if (source === 'rest') {
      single![name] = all(value).at(-1)!;
      multi![name] = all(value);
    } else if (source === 'http' || source === 'url') single![name.toLowerCase()] = all(value).join(',');
    else if (source === 'alb') single![name.toLowerCase()] = all(value).at(-1)!;
    else multi![name.toLowerCase()] = all(value);
  }
  event.body = base64 ? Buffer.from(body).toString('base64') : body;
  event.isBase64Encoded = base64;
  return event as LambdaHttpEvent;
}

/** What the runtime passes as the context: its fields, and the time left before the timeout. */
function runtimeContext(remainingMs = 30_000): Context {
  const deadline = Date.now() + remainingMs;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: 'webhooks',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:111122223333:function:webhooks',
    memoryLimitInMB: '256',
    awsRequestId: crypto.randomUUID(),
    logGroupName: '/aws/lambda/webhooks',
    logStreamName: '2026/03/04/[$LATEST]0123456789abcdef',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

interface Answer {
  statusCode: number;
  statusDescription?: string;
  headers?: Record<string, string>;
  multiValueHeaders?: Record<string, string[]>;
  body: string;
  isBase64Encoded?: boolean;
}

/** Invokes as the runtime does: the event is parsed JSON, the result goes back as JSON. */
async function invoke(handler: (event: LambdaHttpEvent, context: Context) => Promise<unknown>, event: LambdaHttpEvent, context = runtimeContext()): Promise<Answer> {
  const result = await handler(JSON.parse(JSON.stringify(event)) as LambdaHttpEvent, context);
  return JSON.parse(JSON.stringify(result)) as Answer;
}

/** A header of the answer, wherever the source's shape puts it. */
function header(answer: Answer, name: string): string | undefined {
  return answer.headers?.[name] ?? answer.multiValueHeaders?.[name]?.join(',');
}

function expectShape(source: Source, answer: Answer): void {
  if (source === 'alb' || source === 'alb-multi') expect(answer.statusDescription).toMatch(new RegExp(`^${answer.statusCode} [A-Z]`));
  else expect(answer.statusDescription).toBeUndefined();
  if (source === 'alb-multi') expect(answer.headers).toBeUndefined();
  else expect(answer.multiValueHeaders).toBeUndefined();
}

interface Seen {
  webhook: VerifiedWebhook;
  context: LambdaWebhookContext<Context>;
}

function setup(options: Partial<AdapterOptions> = {}, answer: (webhook: VerifiedWebhook) => LambdaHttpResult | void | Promise<LambdaHttpResult | void> = (webhook) => ({
  statusCode: 200,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ received: webhook.id }),
})) {
  const secret = generateSecret();
  const seen: Seen[] = [];
  const rejected: string[] = [];
  const handler = webhookHandler<Context>(
    { secrets: secret, onRejected: (error) => rejected.push(error.code), onError: () => undefined, ...options },
    (webhook, context) => {
      seen.push({ webhook, context });
      return answer(webhook);
    },
  );
  return { secret, seen, rejected, handler };
}

const BODY = '{"type":"invoice.paid","data":{"id":"in_1"}}';

/**
 * The shared behaviour through HTTP API events (payload 2.0), invoked as the runtime does. A
 * failed invocation is what an HTTP API answers for it: 500 `{"message":"Internal Server Error"}`.
 */
function lambdaEndpoint(options: AdapterOptions, recorder: Recorder): Endpoint {
  const handler = webhookHandler<Context>(options, async (webhook) => {
    const { status, body } = await recorder.handle(webhook, webhook.json());
    return { statusCode: status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
  });
  return {
    async send({ headers, body, path = '/hook' }: Outgoing): Promise<Reply> {
      const event = eventFor('http', headers, body);
      const [rawPath, query = ''] = path.split('?') as [string, string?];
      Object.assign(event, { rawPath, rawQueryString: query });
      let answer: Answer;
      try {
        answer = await invoke(handler, event);
      } catch {
        return { status: 500, headers: { 'content-type': 'application/json' }, body: '{"message":"Internal Server Error"}' };
      }
      const lower = Object.fromEntries(Object.entries(answer.headers ?? {}).map(([name, value]) => [name.toLowerCase(), String(value)]));
      return { status: answer.statusCode, headers: lower, body: answer.body };
    },
    close: () => Promise.resolve(),
  };
}

adapterConformance('Lambda (HTTP API events)', async (options, recorder) => lambdaEndpoint(options, recorder));

describe('webhook-receiver/lambda', () => {
  describe.each(SOURCES)('%s events', (source) => {
    it('verifies a body signed by our signer, answers in the source shape, and answers the retry as a duplicate', async () => {
      const { secret, seen, handler } = setup();
      const signed = await signWebhook({ secret, body: BODY });
      const context = runtimeContext();
      const event = eventFor(source, signed.headers, BODY, false);
      const first = await invoke(handler, event, context);
      expect(first).toMatchObject({ statusCode: 200, body: JSON.stringify({ received: signed.id }) });
      expectShape(source, first);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.webhook.json()).toEqual(JSON.parse(BODY));
      // The handler's context: the shared WebhookContext, plus the Lambda context it was invoked with.
      expect(seen[0]!.context.lambda).toBe(context);
      expect(seen[0]!.context.signal).toBeInstanceOf(AbortSignal);
      expect(seen[0]!.context.signal.aborted).toBe(false);
      expect(seen[0]!.context.claim).toMatchObject({ token: expect.any(String) });

      const retry = await invoke(handler, event);
      expect(retry).toMatchObject({ statusCode: 200, body: '{"duplicate":true}' });
      expect(header(retry, 'content-type')).toBe('application/json');
      expectShape(source, retry);
      expect(seen).toHaveLength(1);
    });

    it('verifies a base64 body signed by standardwebhooks', async () => {
      const { secret, seen, handler } = setup();
      const id = `msg_std_${source}`;
      const timestamp = new Date();
      const signature = new StandardWebhook(secret).sign(id, timestamp, BODY);
      const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)), 'webhook-signature': signature };
      const answer = await invoke(handler, eventFor(source, headers, BODY, true));
      expect(answer).toMatchObject({ statusCode: 200, body: JSON.stringify({ received: id }) });
      expect(seen.map((s) => s.webhook.id)).toEqual([id]);
    });

    it('verifies a binary body (not UTF-8) as the bytes that were sent', async () => {
      const { secret, seen, handler } = setup();
      // 0xff and a lone continuation byte are not UTF-8: decoding them to a string and back
      // would change the bytes and break the signature.
      const bytes = new Uint8Array([0x00, 0xff, 0x80, 0xfe, 0x7b, 0xc3, 0x28, 0x0a]);
      const signed = await signWebhook({ secret, body: bytes });
      const answer = await invoke(handler, eventFor(source, signed.headers, bytes));
      expect(answer.statusCode).toBe(200);
      expect([...seen[0]!.webhook.body]).toEqual([...bytes]);
    });

    it('refuses a tampered body with the error envelope, in the source shape', async () => {
      const { secret, seen, rejected, handler } = setup();
      const signed = await signWebhook({ secret, body: BODY });
      const answer = await invoke(handler, eventFor(source, signed.headers, BODY.replace('paid', 'void'), false));
      expect(answer.statusCode).toBe(401);
      expect(JSON.parse(answer.body)).toEqual({ error: 'SIGNATURE_MISMATCH', message: expect.stringMatching(/^no signature matched/) });
      expect(header(answer, 'content-type')).toBe('application/json');
      expectShape(source, answer);
      expect(seen).toEqual([]);
      expect(rejected).toEqual(['SIGNATURE_MISMATCH']);
    });

    it('answers 503 STORE_UNAVAILABLE with Retry-After when the store is down', async () => {
      const down = (): Promise<never> => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
      const { secret, seen, handler } = setup({ idempotency: { store: { claim: down, complete: down, release: down } } });
      const signed = await signWebhook({ secret, body: BODY });
      const answer = await invoke(handler, eventFor(source, signed.headers, BODY, false));
      expect(answer.statusCode).toBe(503);
      expect(JSON.parse(answer.body)).toMatchObject({ error: 'STORE_UNAVAILABLE' });
      expect(header(answer, 'retry-after')).toBe('5');
      if (source === 'alb-multi') expect(answer.multiValueHeaders!['retry-after']).toEqual(['5']);
      expectShape(source, answer);
      expect(seen).toEqual([]);
    });

    it('answers 204 when the handler returns nothing', async () => {
      const { secret, handler } = setup({}, () => undefined);
      const signed = await signWebhook({ secret, body: BODY });
      const answer = await invoke(handler, eventFor(source, signed.headers, BODY, false));
      expect(answer).toMatchObject({ statusCode: 204, body: '' });
      expectShape(source, answer);
    });
  });

  it('reads every value of a repeated header from multiValueHeaders (REST), whatever the case', async () => {
    const { secret, seen, handler } = setup();
    const signed = await signWebhook({ secret, body: BODY });
    // Two webhook-signature headers, the valid one first: `headers` holds only the last (wrong) one.
    const event = eventFor(
      'rest',
      { 'Webhook-Id': signed.id, 'WEBHOOK-TIMESTAMP': String(signed.timestamp), 'Webhook-Signature': [signed.signature, 'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='] },
      BODY,
      false,
    );
    expect(event.headers!['Webhook-Signature']).toBe('v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=');
    expect((await invoke(handler, event)).statusCode).toBe(200);
    expect(seen.map((s) => s.webhook.id)).toEqual([signed.id]);
  });

  it('reads repeated headers on ALB with multi-value headers on', async () => {
    const { secret, seen, handler } = setup();
    const signed = await signWebhook({ secret, body: BODY });
    const event = eventFor('alb-multi', { ...signed.headers, 'webhook-signature': ['v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=', signed.signature] }, BODY);
    expect((await invoke(handler, event)).statusCode).toBe(200);
    expect(seen).toHaveLength(1);
  });

  it('puts the handler’s headers in multiValueHeaders for ALB with multi-value headers on', async () => {
    const { secret, handler } = setup({}, () => ({ statusCode: 202, headers: { 'x-queued': 'yes' }, body: 'queued' }));
    const signed = await signWebhook({ secret, body: BODY });
    const answer = await invoke(handler, eventFor('alb-multi', signed.headers, BODY));
    expect(answer).toEqual({ statusCode: 202, statusDescription: '202 Accepted', multiValueHeaders: { 'x-queued': ['yes'] }, body: 'queued' });
  });

  it('releases the claim when the handler answers 500, so the retry runs it', async () => {
    let attempt = 0;
    const { secret, seen, handler } = setup({}, () => ({ statusCode: ++attempt === 1 ? 500 : 200, body: '' }));
    const signed = await signWebhook({ secret, body: BODY });
    const event = eventFor('http', signed.headers, BODY, false);
    expect((await invoke(handler, event)).statusCode).toBe(500);
    expect((await invoke(handler, event)).statusCode).toBe(200);
    expect((await invoke(handler, event)).body).toBe('{"duplicate":true}');
    expect(seen).toHaveLength(2);
  });

  it('releases the claim when the handler throws, and rethrows so the invocation fails', async () => {
    let attempt = 0;
    const { secret, seen, handler } = setup({}, () => {
      if (++attempt === 1) throw new Error('downstream failed');
      return { statusCode: 200, body: 'ok' };
    });
    const signed = await signWebhook({ secret, body: BODY });
    const event = eventFor('rest', signed.headers, BODY, false);
    await expect(invoke(handler, event)).rejects.toThrow('downstream failed');
    expect((await invoke(handler, event)).statusCode).toBe(200);
    expect(seen).toHaveLength(2);
  });

  it('settles the claim, completion retries included, before it returns (Lambda freezes after)', async () => {
    const inner = memoryStore();
    let completes = 0;
    const store: IdempotencyStore = {
      claim: (key, lockMs) => inner.claim(key, lockMs),
      release: (key, token) => inner.release(key, token),
      // The first completion fails (a store blip): the receiver retries it in the background.
      complete: async (key, token, ttlMs) => {
        if (++completes === 1) throw new Error('ETIMEDOUT');
        return inner.complete(key, token, ttlMs);
      },
    };
    const { secret, handler } = setup({ idempotency: { store } });
    const signed = await signWebhook({ secret, body: BODY });
    const answer = await invoke(handler, eventFor('http', signed.headers, BODY, false));
    expect(answer.statusCode).toBe(200);
    // Returned only once the retried completion landed: nothing was left to run frozen.
    expect(completes).toBe(2);
    expect(await inner.claim('default:s:' + signed.id, 1000)).toEqual({ status: 'completed' });
  });

  it('locks no longer than the invocation has left, claim and renewals alike', async () => {
    const inner = memoryStore();
    const locks: number[] = [];
    const extends_: number[] = [];
    const store: IdempotencyStore = {
      claim: (key, lockMs) => (locks.push(lockMs), inner.claim(key, lockMs)),
      complete: (key, token, ttlMs) => inner.complete(key, token, ttlMs),
      release: (key, token) => inner.release(key, token),
      extend: (key, token, lockMs) => (extends_.push(lockMs), inner.extend(key, token, lockMs)),
    };
    let renewed!: () => void;
    const renewal = new Promise<void>((resolve) => (renewed = resolve));
    // lockSeconds 0.3: the heartbeat renews every 100 ms; the handler waits for one renewal.
    const { secret, handler } = setup({ idempotency: { store, lockSeconds: 0.3 } }, async () => {
      await renewal;
      return { statusCode: 200, body: '' };
    });
    const watch = setInterval(() => extends_.length > 0 && renewed(), 10);
    try {
      const signed = await signWebhook({ secret, body: BODY });
      const answer = await invoke(handler, eventFor('http', signed.headers, BODY, false), runtimeContext(250));
      expect(answer.statusCode).toBe(200);
    } finally {
      clearInterval(watch);
    }
    expect(locks).toHaveLength(1);
    expect(locks[0]).toBeLessThanOrEqual(250);
    expect(locks[0]).toBeGreaterThan(150);
    // Renewed for what was left of the 250 ms, not for another 300.
    expect(extends_[0]).toBeLessThan(250);

    // Without a Lambda context (a direct call), the configured lock applies.
    const other = setup({ idempotency: { store, lockSeconds: 0.3 } }, () => undefined);
    const signed = await signWebhook({ secret: other.secret, body: BODY });
    await other.handler(eventFor('http', signed.headers, BODY, false), undefined as unknown as Context);
    expect(locks[1]).toBe(300);
  });

  it('renews for lockSeconds, not for the rest of the invocation: a retry after an invocation that died runs about lockSeconds later', async () => {
    const inner = memoryStore();
    const extended: number[] = [];
    let dead = false;
    let renewed!: () => void;
    const renewal = new Promise<void>((resolve) => (renewed = resolve));
    // The first container's view of the store: once its invocation died, nothing it sends arrives.
    const dying: IdempotencyStore = {
      claim: (key, lockMs) => inner.claim(key, lockMs),
      complete: (key, token, ttlMs) => inner.complete(key, token, ttlMs),
      release: (key, token) => inner.release(key, token),
      extend: (key, token, lockMs) => {
        if (dead) return new Promise<boolean>(() => {});
        extended.push(lockMs);
        renewed();
        return inner.extend(key, token, lockMs);
      },
    };
    let lost!: () => void;
    const signalled = new Promise<void>((resolve) => (lost = resolve));
    const first = setup({ idempotency: { store: dying, lockSeconds: 0.6 } }, async () => {
      await renewal;
      dead = true;
      // Stands for the frozen invocation; ends once the receiver saw its lock run out.
      first.seen[0]!.context.signal.addEventListener('abort', () => lost());
      await signalled;
      return { statusCode: 500, body: '' };
    });
    const signed = await signWebhook({ secret: first.secret, body: BODY });
    const event = eventFor('http', signed.headers, BODY, false);
    // A 15-minute timeout (Lambda's longest), far beyond the 600 ms lock.
    const running = invoke(first.handler, event, runtimeContext(15 * 60_000));
    await renewal;
    expect(extended[0]).toBeLessThanOrEqual(600);
    expect(extended[0]).toBeGreaterThan(0);

    // The sender's retry reaches another container while the first is dead.
    const second = setup({ secrets: first.secret, idempotency: { store: inner, lockSeconds: 0.6 } });
    const started = Date.now();
    const retry = await invoke(second.handler, event, runtimeContext(15 * 60_000));
    expect(retry.statusCode).toBe(409);
    expect(header(retry, 'retry-after')).toBe('1');
    let answer = retry;
    while (answer.statusCode === 409 && Date.now() - started < 10_000) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      answer = await invoke(second.handler, event, runtimeContext(15 * 60_000));
    }
    expect(answer.statusCode).toBe(200);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(second.seen).toHaveLength(1);
    expect((await running).statusCode).toBe(500);
  });

  it('claims in the store the app gave, with the lock bounded by the time left (no store wrapper)', async () => {
    const store = memoryStore();
    const locks: number[] = [];
    const claim = store.claim.bind(store);
    store.claim = (key, lockMs) => (locks.push(lockMs), claim(key, lockMs));
    const { secret, seen, handler } = setup({ idempotency: { store } });
    const signed = await signWebhook({ secret, body: BODY });
    expect((await invoke(handler, eventFor('http', signed.headers, BODY, false), runtimeContext(2000))).statusCode).toBe(200);
    // The handle stores check (postgresStore.transaction(context, …)): the store itself.
    expect(seen[0]!.context.claim!.store).toBe(store);
    expect(locks).toHaveLength(1);
    expect(locks[0]).toBeLessThanOrEqual(2000);
    expect(locks[0]).toBeGreaterThan(1000);
    expect(seen[0]!.context.claim!.lockMs).toBe(locks[0]);
  });

  it('answers a payload the handler refused (INVALID_PAYLOAD) 400 in the envelope, and releases the claim', async () => {
    let attempt = 0;
    const { secret, seen, handler } = setup({}, (webhook) => {
      if (++attempt === 1) webhook.json({ '~standard': { version: 1, vendor: 'test', validate: () => ({ issues: [{ message: 'no', path: ['data'] }] }) } });
      return { statusCode: 200, body: 'ok' };
    });
    for (const source of ['rest', 'alb'] as const) {
      attempt = 0;
      const signed = await signWebhook({ secret, body: BODY });
      const event = eventFor(source, signed.headers, BODY, false);
      const answer = await invoke(handler, event);
      expect(answer.statusCode).toBe(400);
      expect(header(answer, 'content-type')).toBe('application/json');
      expect(JSON.parse(answer.body)).toEqual({ error: 'INVALID_PAYLOAD', message: 'the payload does not match the expected schema (1 issue, at data)' });
      expectShape(source, answer);
      expect((await invoke(handler, event)).statusCode).toBe(200);
    }
    expect(seen).toHaveLength(4);
  });

  it('verifies a gzip body (base64, as API Gateway passes it) as the decoded bytes, and refuses br with 415', async () => {
    const { secret, seen, rejected, handler } = setup();
    const signed = await signWebhook({ secret, body: BODY });
    const gzip = await invoke(handler, eventFor('rest', { ...signed.headers, 'Content-Encoding': 'gzip' }, new Uint8Array(gzipSync(BODY))));
    expect(gzip).toMatchObject({ statusCode: 200, body: JSON.stringify({ received: signed.id }) });
    expect(seen.map((s) => s.webhook.text())).toEqual([BODY]);
    const br = await invoke(handler, eventFor('http', { ...signed.headers, 'content-encoding': 'br' }, new Uint8Array(brotliCompressSync(BODY))));
    expect(br.statusCode).toBe(415);
    expect(JSON.parse(br.body)).toEqual({
      error: 'UNSUPPORTED_ENCODING',
      message: 'content-encoding "br" is not supported: send the body as is, or compressed once with gzip or deflate',
    });
    expect(rejected).toEqual(['UNSUPPORTED_ENCODING']);
  });

  it('throws a TypeError for an event of no HTTP shape', async () => {
    const { handler } = setup();
    await expect(handler({ Records: [] } as unknown as LambdaHttpEvent, runtimeContext())).rejects.toThrow(TypeError);
    await expect(handler(null as unknown as LambdaHttpEvent, runtimeContext())).rejects.toThrow(TypeError);
    expect(() => webhookHandler({ secrets: generateSecret() }, undefined as never)).toThrow(TypeError);
  });

  it('fits the handler types of @types/aws-lambda for each source, with no need of them', () => {
    const handler = webhookHandler<Context>({ secrets: generateSecret() }, () => undefined);
    // Checked by tsc (npm run typecheck): each assignment fails to compile if the shapes drift.
    const rest: Handler<APIGatewayProxyEvent, APIGatewayProxyResult> = handler;
    const http: Handler<APIGatewayProxyEventV2, APIGatewayProxyResultV2> = handler;
    const url: Handler<LambdaFunctionURLEvent, LambdaFunctionURLResult> = handler;
    const alb: Handler<ALBEvent, ALBResult> = handler;
    expectTypeOf<Context>().toExtend<LambdaContextLike>();
    expect([rest, http, url, alb].every((h) => h === handler)).toBe(true);
  });
});
