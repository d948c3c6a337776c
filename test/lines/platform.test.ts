/**
 * What the package takes from the platform and that has changed between Node lines, checked on
 * the Node that runs this file (each of 22, 24 and 26 in `npm test`, see test/lines/run.ts):
 *
 * - `process.getBuiltinModule` (Node 20.16 and 22.3): the crypto seam (src/crypto.ts) reaches
 *   `node:crypto` through it, and takes WebCrypto when it is missing;
 * - `request.signal` aborted when the client leaves, as a Node server (@hono/node-server) builds
 *   the `Request` over node:http: the handler can see it, and the Fetch handler does not run a
 *   handler for a client that already left (it releases the claim instead).
 *
 * `Request`/`Response` themselves (undici, which each line bundles at its own version) are
 * exercised on each line by the adapter suites in the same subset (test/adapters/fetch.test.ts:
 * streamed bodies cut at the limit, 499 for a departed client, the handler's own Response).
 */

import { createRequire } from 'node:module';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { webhookHandler, type FetchHandlerOptions, type WebhookHandler } from '../../adapters/fetch.ts';
import { defaultBackend } from '../../src/crypto.ts';
import { generateSecret } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { VerifiedWebhook } from '../../src/verify.ts';
import { expectDuplicate, expectProcessed, gatedStore, signed } from '../adapters/conformance.ts';
import { postAndLeave, servedFetch } from '../adapters/node-http.ts';

const line = `Node ${process.versions.node}`;

describe(`${line}: the crypto seam`, () => {
  it('finds node:crypto through process.getBuiltinModule, the module require() gives', () => {
    expect(typeof process.getBuiltinModule).toBe('function');
    expect(process.getBuiltinModule('node:crypto')).toBe(createRequire(import.meta.url)('node:crypto'));
    expect(defaultBackend.name).toBe('node');
  });
});

describe(`${line}: a client that leaves, as a Node server tells the Fetch handler`, () => {
  const open: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((close) => close()));
  });

  async function serve(options: FetchHandlerOptions, handler: WebhookHandler) {
    const served = await servedFetch(webhookHandler({ onRejected: () => {}, ...options }, handler));
    open.push(served.close);
    return { server: served.server, port: served.port, send: served.endpoint.send };
  }

  const answer = (webhook: VerifiedWebhook) => Response.json({ ok: true, id: webhook.id, keyId: webhook.keyId ?? null, signed: webhook.signed });

  it('aborts request.signal while the handler runs; the handler’s success still completes the claim', async () => {
    const secret = generateSecret();
    const runs: string[] = [];
    const signals: string[] = [];
    let entered!: () => void;
    const firstEntered = new Promise<void>((resolve) => (entered = resolve));
    const { port, send } = await serve({ secrets: secret }, async (webhook, request) => {
      runs.push(webhook.id);
      entered();
      // Waits for the platform to abort the signal; bounded, so that a line that never aborts it
      // fails the test instead of hanging it.
      signals.push(
        await new Promise<string>((resolve) => {
          const timer = setTimeout(() => resolve('not aborted within 5 s'), 5000);
          request.signal.addEventListener('abort', () => (clearTimeout(timer), resolve('aborted')), { once: true });
        }),
      );
      return answer(webhook);
    });
    const request = await signed(secret, { type: 'a' });
    await postAndLeave(port, '/hook', request.headers, request.body, firstEntered);
    await vi.waitFor(() => expect(signals).toEqual(['aborted']), { timeout: 10_000, interval: 10 });
    // Its answer reached nobody, but it succeeded: the sender's retry is a duplicate.
    await vi.waitFor(async () => expectDuplicate(await send(request)), { timeout: 10_000, interval: 25 });
    expect(runs).toEqual([request.id]);
  });

  it('has request.signal aborted when the client left before the handler: not run, claim released', async () => {
    const secret = generateSecret();
    const runs: string[] = [];
    const store = gatedStore(memoryStore());
    const { server, port, send } = await serve({ secrets: secret, idempotency: { store } }, (webhook) => {
      runs.push(webhook.id);
      return answer(webhook);
    });
    const request = await signed(secret, { type: 'a' });
    // @hono/node-server listens for the response's 'close' before this listener does, so the
    // signal is aborted by the time this resolves.
    const closed = new Promise<void>((resolve) => server.once('request', (_req, res) => res.once('close', () => resolve())));
    await postAndLeave(port, '/hook', request.headers, request.body, store.claiming);
    await closed;
    store.open();
    await vi.waitFor(() => expect(store.releases).toBe(1), { timeout: 5000, interval: 10 });
    expect(runs).toEqual([]);
    expectProcessed(await send(request), request.id);
    expect(runs).toEqual([request.id]);
  });
});
