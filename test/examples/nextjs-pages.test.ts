/**
 * examples/nextjs-pages/pages/api/webhooks.ts served by Next.js's own API route resolver
 * (`apiResolver`, what `next start` runs for a Pages Router API route) over real HTTP: with the
 * route's `config` (bodyParser off), and with the body parser left on.
 */

import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { generateSecret, signWebhook } from 'webhook-receiver';
import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';
import { listen } from '../adapters/node-http.ts';
import { BODY, envelope, post } from './support.ts';

type Resolver = (req: unknown, res: unknown, query: unknown, module: unknown, context: unknown, propagateError: boolean, dev: boolean, page: string) => Promise<void>;
const { apiResolver } = createRequire(import.meta.url)('next/dist/server/api-utils/node/api-resolver.js') as { apiResolver: Resolver };

const secret = generateSecret();
const servers: (() => Promise<void>)[] = [];
let log: MockInstance<typeof console.log>;
let warn: MockInstance<typeof console.warn>;
let route: { default: unknown; config: { api: { bodyParser: boolean } } };

/** Serves `module` the way Next.js serves an API route. */
async function serve(module: object): Promise<string> {
  const context = { previewModeId: 'id', previewModeEncryptionKey: 'key', previewModeSigningKey: 'key', dev: false };
  const server = createServer((req, res) => void apiResolver(req, res, {}, module, context, false, false, '/api/webhooks'));
  const listening = await listen(server);
  servers.push(listening.close);
  return `http://127.0.0.1:${listening.port}/api/webhooks`;
}

beforeAll(async () => {
  vi.stubEnv('WEBHOOK_SECRET', secret);
  log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
  warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
  route = (await import('../../examples/nextjs-pages/pages/api/webhooks.ts')) as unknown as typeof route;
});
afterAll(async () => {
  await Promise.all(servers.map((close) => close()));
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

describe('examples/nextjs-pages/pages/api/webhooks.ts', () => {
  it('turns the body parser off in its config', () => {
    expect(route.config).toEqual({ api: { bodyParser: false } });
  });

  it('processes a signed event once, answers the retry as a duplicate, refuses a tampered body', async () => {
    const url = await serve(route);
    const signed = await signWebhook({ secret, body: BODY, id: 'msg_pages_1' });
    expect(await post(url, signed.headers)).toEqual({ status: 200, body: { received: true, id: 'msg_pages_1', keyId: null } });
    expect(await post(url, signed.headers)).toEqual({ status: 200, body: { duplicate: true } });
    expect(await post(url, signed.headers, BODY.replace('paid', 'void'))).toEqual({ status: 401, body: envelope('SIGNATURE_MISMATCH', /^no signature matched/) });
    expect(log.mock.calls.map(([line]) => String(line))).toEqual(['webhook msg_pages_1: invoice.paid (key 0)']);
  });

  it('answers BODY_UNAVAILABLE naming bodyParser: false when the body parser was left on', async () => {
    log.mockClear();
    warn.mockClear();
    const url = await serve({ ...route, config: { api: {} } });
    const signed = await signWebhook({ secret, body: BODY, id: 'msg_pages_parsed' });
    const answer = await post(url, signed.headers);
    expect(answer).toEqual({ status: 500, body: { error: 'BODY_UNAVAILABLE', message: 'the server could not read the raw request body, so the signature cannot be checked' } });
    // The fix goes to the log, never to the sender.
    expect(warn.mock.calls.map(([line]) => String(line)).join('\n')).toMatch(/export const config = \{ api: \{ bodyParser: false \} \}\)$/);
    expect(log).not.toHaveBeenCalled();
    expect(warn.mock.calls.join('\n')).not.toContain(secret);
  });
});
