/**
 * The Next.js route handler file, as Next.js uses it: import the module and call its `POST`
 * export with a `Request` (with WEBHOOK_SECRET in the environment, as in a deployment), and
 * import it without the secret, as `next build` does.
 */

import { generateSecret, signWebhook } from 'webhook-receiver';
import { signedRequest } from 'webhook-receiver/testing';
import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';
import { BODY, envelope } from './support.ts';

const secret = generateSecret();
const URL_BASE = 'http://localhost:3000/api/webhooks';
let POST: (request: Request) => Promise<Response>;
let log: MockInstance<typeof console.log>;
let warn: MockInstance<typeof console.warn>;

beforeAll(async () => {
  vi.stubEnv('WEBHOOK_SECRET', secret);
  ({ POST } = await import('../../examples/nextjs/app/api/webhooks/route.ts'));
  log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
  warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
});
afterAll(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

async function answer(response: Response): Promise<{ status: number; body: unknown }> {
  return { status: response.status, body: await response.json() };
}

/** The ids the route's handler logged: one line per handler run. */
const handled = (): string[] => log.mock.calls.map(([line]) => String(line).split(':')[0]!);

describe('examples/nextjs/app/api/webhooks/route.ts', () => {
  it('processes a signed event once and answers its retry as a duplicate', async () => {
    expect(await answer(await POST(await signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_next_1' })))).toEqual({
      status: 200,
      body: { received: true, id: 'msg_next_1', keyId: null },
    });
    expect(await answer(await POST(await signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_next_1' })))).toEqual({
      status: 200,
      body: { duplicate: true },
    });
    expect(handled()).toEqual(['webhook msg_next_1']);
  });

  it('refuses a tampered body, a millisecond timestamp and an unsigned event in the error envelope', async () => {
    log.mockClear();
    const signed = await signWebhook({ secret, body: BODY });
    const tampered = new Request(URL_BASE, { method: 'POST', headers: signed.headers, body: BODY.replace('paid', 'void') });
    expect(await answer(await POST(tampered))).toEqual({ status: 401, body: envelope('SIGNATURE_MISMATCH', /^no signature matched/) });
    const milliseconds = await signedRequest(URL_BASE, { secret, body: BODY, timestamp: Date.now() });
    expect(await answer(await POST(milliseconds))).toEqual({ status: 400, body: envelope('INVALID_TIMESTAMP', /it looks like milliseconds/) });
    const unsigned = new Request(URL_BASE, { method: 'POST', headers: { 'webhook-id': 'msg_next_u', 'webhook-timestamp': String(signed.timestamp) }, body: BODY });
    expect(await answer(await POST(unsigned))).toEqual({ status: 401, body: envelope('MISSING_SIGNATURE', /^webhook-signature header is missing/) });
    expect(handled()).toEqual([]);
    // The default onRejected: one line per rejection in the server's log, without the secret.
    expect(warn.mock.calls.map(([line]) => /^\[webhook-receiver\] rejected POST \/api\/webhooks: ([A-Z_]+) /.exec(String(line))?.[1])).toEqual([
      'SIGNATURE_MISMATCH',
      'INVALID_TIMESTAMP',
      'MISSING_SIGNATURE',
    ]);
    expect(warn.mock.calls.join('\n')).not.toContain(secret);
  });

  it('runs the handler once for ten concurrent deliveries of one id', async () => {
    log.mockClear();
    const requests = await Promise.all(Array.from({ length: 10 }, () => signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_next_many' })));
    const answers = await Promise.all(requests.map(async (request) => answer(await POST(request))));
    const processed = answers.filter((a) => a.status === 200 && (a.body as { received?: boolean }).received);
    expect(processed).toEqual([{ status: 200, body: { received: true, id: 'msg_next_many', keyId: null } }]);
    // The others came while it ran (409 IN_PROGRESS) or after it finished (200 duplicate).
    for (const other of answers.filter((a) => !processed.includes(a))) {
      expect([
        { status: 409, body: envelope('IN_PROGRESS', /being processed/) },
        { status: 200, body: { duplicate: true } },
      ]).toContainEqual(other);
    }
    expect(handled()).toEqual(['webhook msg_next_many']);
  });
});

describe('examples/nextjs/app/api/webhooks/route.ts during next build', () => {
  it('loads without WEBHOOK_SECRET, refuses requests until it is set, then serves them', async () => {
    vi.stubEnv('WEBHOOK_SECRET', '');
    // A fresh copy of the module, as a build loads it: importing must not throw.
    vi.resetModules();
    const route = (await import('../../examples/nextjs/app/api/webhooks/route.ts')) as { POST: (request: Request) => Promise<Response> };
    const first = await signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_next_build' });
    await expect(route.POST(first)).rejects.toThrow(new Error('Set WEBHOOK_SECRET to the signing secret of this destination (whsec_…)'));

    vi.stubEnv('WEBHOOK_SECRET', secret);
    const retry = await signedRequest(URL_BASE, { secret, body: BODY, id: 'msg_next_build' });
    expect(await answer(await route.POST(retry))).toEqual({ status: 200, body: { received: true, id: 'msg_next_build', keyId: null } });
  });
});
