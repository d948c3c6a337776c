/**
 * What examples/express.ts must do on every Express it supports. express.test.ts runs it on
 * Express 5 (what `express` resolves to here), express4.test.ts on Express 4 (`express` mocked to
 * the `express4` alias), so the example's code stays exactly what a user copies.
 */

import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import request from 'supertest';
import { generateSecret, PermanentError, signWebhook } from 'webhook-receiver';
import { afterEach, expect, it } from 'vitest';
import { createApp } from '../../examples/express.ts';
import { BODY, concurrentDeliveries, envelope, post, Runs } from './support.ts';

const quiet = { onRejected: () => undefined };
const next = { key: generateSecret(), keyId: 'next' };
const prev = { key: generateSecret(), keyId: 'prev' };

/** Registers the example's tests in the enclosing `describe`. */
export function expressExampleTests(): void {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
    server = undefined;
  });

  it('processes a signed event once, names the key that verified it, and answers its retry as a duplicate', async () => {
    const runs = new Runs();
    const app = createApp({ secrets: [next, prev], ...quiet }, runs.onEvent);
    const signed = await signWebhook({ secret: prev.key, body: BODY, id: 'msg_express_1' });
    const first = await request(app).post('/webhooks').set(signed.headers).set('content-type', 'application/json').send(BODY);
    expect([first.status, first.body]).toEqual([200, { received: true, id: 'msg_express_1', keyId: 'prev' }]);

    const retry = await signWebhook({ secret: next.key, body: BODY, id: 'msg_express_1' });
    const second = await request(app).post('/webhooks').set(retry.headers).set('content-type', 'application/json').send(BODY);
    expect([second.status, second.body]).toEqual([200, { duplicate: true }]);
    expect(runs.runs).toEqual([{ id: 'msg_express_1', type: 'invoice.paid', keyId: 'prev' }]);
  });

  it('refuses a tampered body and a retired key in the error envelope, without running the handler', async () => {
    const runs = new Runs();
    const app = createApp({ secrets: [next, prev], ...quiet }, runs.onEvent);
    const signed = await signWebhook({ secret: next.key, body: BODY });
    const tampered = await request(app).post('/webhooks').set(signed.headers).set('content-type', 'application/json').send(BODY.replace('in_1', 'in_2'));
    expect([tampered.status, tampered.body]).toEqual([401, envelope('SIGNATURE_MISMATCH', /^no signature matched: 1 v1 entry tried against 2 HMAC secrets/)]);
    expect(tampered.headers['content-type']).toMatch(/^application\/json/);

    const retired = await signWebhook({ secret: generateSecret(), body: BODY });
    const old = await request(app).post('/webhooks').set(retired.headers).set('content-type', 'application/json').send(BODY);
    expect([old.status, old.body.error]).toEqual([401, 'SIGNATURE_MISMATCH']);
    expect(runs.runs).toEqual([]);
  });

  it('keeps express.json() for the other routes', async () => {
    const app = createApp({ secrets: next, ...quiet });
    const echoed = await request(app).post('/api/echo').send({ hello: 'world' });
    expect([echoed.status, echoed.body]).toEqual([200, { parsed: { hello: 'world' } }]);
  });

  it('runs the handler once for ten concurrent deliveries of one id, over real HTTP', async () => {
    const runs = new Runs();
    server = createApp({ secrets: next, ...quiet }, runs.onEvent).listen(0, '127.0.0.1');
    await new Promise((resolve) => server!.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
    const signed = await signWebhook({ secret: next.key, body: BODY, id: 'msg_express_many' });
    const { statuses } = await concurrentDeliveries(() => post(url, signed.headers), runs, 10);
    expect(statuses).toEqual([200, ...Array<number>(9).fill(409)]);
    expect(runs.runs).toHaveLength(1);
  });

  for (const when of ['at once', 'later'] as const) {
    it(`answers 500 and releases the id when the handler fails ${when}, so the retry runs it again`, async () => {
      let attempts = 0;
      // 'later': a rejected promise, which Express 4 would leave unhandled without next(error).
      const app = createApp({ secrets: next, ...quiet }, async () => {
        attempts += 1;
        if (when === 'later') await new Promise((resolve) => setTimeout(resolve, 5));
        if (attempts === 1) throw new Error('database unavailable');
      });
      const id = `msg_express_fails_${when.replace(' ', '_')}`;
      const signed = await signWebhook({ secret: next.key, body: BODY, id });
      const failed = await request(app).post('/webhooks').set(signed.headers).set('content-type', 'application/json').send(BODY);
      expect(failed.status).toBe(500);
      const retried = await request(app).post('/webhooks').set(signed.headers).set('content-type', 'application/json').send(BODY);
      expect([retried.status, retried.body]).toEqual([200, { received: true, id, keyId: 'next' }]);
      expect(attempts).toBe(2);
    });
  }

  it('answers a body that is not JSON and a PermanentError in the JSON envelope over real HTTP, never an HTML page', async () => {
    const runs = new Runs();
    server = createApp({ secrets: next, ...quiet }, (event, webhook) => {
      if (event.type === 'order.unknown') throw new PermanentError('no such order');
      return runs.onEvent(event, webhook);
    }).listen(0, '127.0.0.1');
    await new Promise((resolve) => server!.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
    const notJson = await signWebhook({ secret: next.key, body: 'not json {' });
    const refused = await post(url, { ...notJson.headers, 'content-type': 'application/json' }, 'not json {');
    expect([refused.status, refused.body]).toEqual([400, { error: 'INVALID_PAYLOAD', message: 'the payload is not valid JSON' }]);
    const unknownBody = '{"type":"order.unknown"}';
    const unknown = await signWebhook({ secret: next.key, body: unknownBody });
    const permanent = await post(url, { ...unknown.headers, 'content-type': 'application/json' }, unknownBody);
    expect([permanent.status, permanent.body]).toEqual([422, { error: 'PERMANENT_FAILURE', message: 'no such order' }]);
    expect(runs.runs).toEqual([]);
  });
}
