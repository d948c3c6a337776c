/**
 * createTestReceiver against a real sender: fetch over loopback, re-signing and retrying on the
 * statuses `respond` picks, the way the relay service retries a destination.
 */

import { request as httpRequest, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createTestReceiver, signedRequest, type Delivery, type TestReceiver } from '../../src/testing/index.ts';
import { OTHER_SECRET, SECRET, nowSeconds } from './support.ts';

/** A sender that re-signs each attempt (new timestamp, same id) and retries non-2xx answers. */
async function deliver(url: string, input: { secret: string; body: object; id: string }, options: { maxAttempts: number; retryOn?: (status: number) => boolean }): Promise<number[]> {
  const statuses: number[] = [];
  for (let attempt = 1; attempt <= options.maxAttempts; attempt++) {
    const response = await fetch(await signedRequest(url, input));
    await response.arrayBuffer();
    statuses.push(response.status);
    if (response.ok || !(options.retryOn ?? (() => true))(response.status)) break;
    await new Promise((resolve) => setTimeout(resolve, 5 * attempt));
  }
  return statuses;
}

async function withReceiver(options: Parameters<typeof createTestReceiver>[0], run: (receiver: TestReceiver) => Promise<void>): Promise<void> {
  const receiver = await createTestReceiver(options);
  try {
    await run(receiver);
  } finally {
    await receiver.close();
  }
}

describe('createTestReceiver', () => {
  it('listens on 127.0.0.1 and answers a verified delivery 204 by default, recording everything', async () => {
    await withReceiver({ secrets: SECRET }, async (receiver) => {
      expect(receiver.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const request = await signedRequest(`${receiver.url}/hooks/a?x=1`, { secret: SECRET, body: { type: 'ping' }, id: 'msg_rec', headers: { 'X-Trace': 'T1' } });
      const response = await fetch(request);
      expect(response.status).toBe(204);
      const [delivery] = await receiver.waitForDeliveries(1);
      expect(receiver.deliveries).toHaveLength(1);
      expect(delivery!.method).toBe('POST');
      expect(delivery!.path).toBe('/hooks/a?x=1');
      expect(delivery!.status).toBe(204);
      expect(new TextDecoder().decode(delivery!.body)).toBe('{"type":"ping"}');
      expect(delivery!.headers).toContainEqual(['webhook-id', 'msg_rec']);
      expect(delivery!.headers.find(([name]) => name.toLowerCase() === 'x-trace')?.[1]).toBe('T1');
      expect(delivery!.verification.ok && [delivery!.verification.webhook.id, delivery!.verification.webhook.keyIndex]).toEqual(['msg_rec', 0]);
    });
  });

  it('records header names in the case they arrived in, and repeated headers as separate pairs', async () => {
    await withReceiver({ secrets: SECRET }, async (receiver) => {
      const port = Number(new URL(receiver.url).port);
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          { host: '127.0.0.1', port, method: 'POST', path: '/case', headers: { 'Webhook-ID': 'msg_case', 'X-Multi': ['a', 'b'], 'Content-Length': '2' } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end('{}');
      });
      // 204 whatever the verdict; the verdict is recorded.
      expect(status).toBe(204);
      const [delivery] = await receiver.waitForDeliveries(1);
      expect(delivery!.headers.filter(([name]) => name !== 'Host' && name !== 'Connection')).toEqual([
        ['Webhook-ID', 'msg_case'],
        ['X-Multi', 'a'],
        ['X-Multi', 'b'],
        ['Content-Length', '2'],
      ]);
      expect(delivery!.verification.ok === false && delivery!.verification.error.code).toBe('MISSING_TIMESTAMP');
    });
  });

  it('lets a retrying sender through after the failures respond asks for, counting attempts per webhook-id', async () => {
    const seen: [string, number, number][] = [];
    await withReceiver(
      {
        secrets: SECRET,
        respond(delivery, attempt) {
          const id = delivery.verification.ok ? delivery.verification.webhook.id : '?';
          seen.push([id, attempt, delivery.status]);
          if (id === 'msg_a') return attempt < 3 ? 503 : 204;
          return attempt === 1 ? 429 : 200;
        },
      },
      async (receiver) => {
        const [a, b] = await Promise.all([
          deliver(`${receiver.url}/a`, { secret: SECRET, body: { n: 1 }, id: 'msg_a' }, { maxAttempts: 5 }),
          deliver(`${receiver.url}/b`, { secret: SECRET, body: { n: 2 }, id: 'msg_b' }, { maxAttempts: 5 }),
        ]);
        expect(a).toEqual([503, 503, 204]);
        expect(b).toEqual([429, 200]);
        const deliveries = await receiver.waitForDeliveries(5);
        expect(deliveries).toHaveLength(5);
        expect(deliveries.every((d) => d.verification.ok)).toBe(true);
        expect(deliveries.filter((d) => d.path === '/a').map((d) => d.status)).toEqual([503, 503, 204]);
        expect(deliveries.filter((d) => d.path === '/b').map((d) => d.status)).toEqual([429, 200]);
        // Every attempt was signed afresh; the receiver saw each id's attempts in order, with 204 as the default.
        expect(seen.filter(([id]) => id === 'msg_a')).toEqual([['msg_a', 1, 204], ['msg_a', 2, 204], ['msg_a', 3, 204]]);
        expect(seen.filter(([id]) => id === 'msg_b')).toEqual([['msg_b', 1, 204], ['msg_b', 2, 204]]);
      },
    );
  });

  it('answers 204 by default whatever the verdict, and records the verdict', async () => {
    await withReceiver({ secrets: SECRET }, async (receiver) => {
      // A sender that retries anything but a 2xx delivers once: the receiver did not ask for a retry.
      const statuses = await deliver(receiver.url, { secret: OTHER_SECRET, body: { n: 1 }, id: 'msg_forged' }, { maxAttempts: 3 });
      expect(statuses).toEqual([204]);
      const response = await fetch(receiver.url, { method: 'POST', headers: { 'webhook-id': 'msg_unsigned', 'webhook-timestamp': String(nowSeconds()) }, body: '{}' });
      expect(response.status).toBe(204);
      expect(await response.text()).toBe('');
      const [forged, unsigned] = await receiver.waitForDeliveries(2);
      expect(forged!.verification.ok === false && forged!.verification.error.code).toBe('SIGNATURE_MISMATCH');
      expect(forged!.status).toBe(204);
      expect(unsigned!.verification.ok === false && unsigned!.verification.error.code).toBe('MISSING_SIGNATURE');
      expect(unsigned!.status).toBe(204);
    });
  });

  it("answers like a real receiver when respond returns the verifier's status: that status and the error envelope", async () => {
    const respond = (delivery: Delivery) => (delivery.verification.ok ? 204 : delivery.verification.error.status);
    await withReceiver({ secrets: SECRET, respond }, async (receiver) => {
      const statuses = await deliver(receiver.url, { secret: OTHER_SECRET, body: { n: 1 }, id: 'msg_forged' }, { maxAttempts: 3, retryOn: (s) => s >= 500 });
      expect(statuses).toEqual([401]);
      const response = await fetch(receiver.url, { method: 'POST', headers: { 'webhook-id': 'msg_unsigned', 'webhook-timestamp': String(nowSeconds()) }, body: '{}' });
      expect(response.status).toBe(401);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(await response.json()).toEqual({ error: 'MISSING_SIGNATURE', message: expect.stringMatching(/^webhook-signature header is missing/) });
      const signed = await fetch(await signedRequest(receiver.url, { secret: SECRET, body: {}, id: 'msg_ok' }));
      expect(signed.status).toBe(204);
      const deliveries = await receiver.waitForDeliveries(3);
      expect(deliveries.map((d) => [d.status, d.verification.ok || d.verification.error.code])).toEqual([
        [401, 'SIGNATURE_MISMATCH'],
        [401, 'MISSING_SIGNATURE'],
        [204, true],
      ]);
    });
  });

  it('lists deliveries in arrival order, and counts attempts by arrival, even when a later request is answered first', async () => {
    const answered: [string, number][] = [];
    const respond = (delivery: Delivery, attempt: number) => {
      answered.push([delivery.path, attempt]);
      return 204;
    };
    await withReceiver({ secrets: SECRET, respond }, async (receiver) => {
      const first = await signedRequest(`${receiver.url}/first`, { secret: SECRET, body: { n: 1 }, id: 'msg_same' });
      const firstBody = new Uint8Array(await first.arrayBuffer());
      // The first request sends its headers and part of its body, and stalls.
      const slow = httpRequest({
        host: '127.0.0.1',
        port: Number(new URL(receiver.url).port),
        method: 'POST',
        path: '/first',
        headers: { ...Object.fromEntries(first.headers), 'content-length': String(firstBody.byteLength) },
      });
      const slowStatus = new Promise<number>((resolve, reject) => {
        slow.on('response', (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        slow.on('error', reject);
      });
      await new Promise<void>((resolve) => slow.write(firstBody.subarray(0, 3), () => resolve()));
      // A bounded pause for the receiver to take the first request in (it numbers it then).
      await new Promise((resolve) => setTimeout(resolve, 100));

      // The second arrives later, complete, and is answered while the first still waits for its body.
      const second = await fetch(await signedRequest(`${receiver.url}/second`, { secret: SECRET, body: { n: 2 }, id: 'msg_same' }));
      expect(second.status).toBe(204);
      expect((await receiver.waitForDeliveries(1)).map((d) => d.path)).toEqual(['/second']);

      slow.end(firstBody.subarray(3));
      expect(await slowStatus).toBe(204);
      const deliveries = await receiver.waitForDeliveries(2);
      expect(deliveries.map((d) => d.path)).toEqual(['/first', '/second']);
      expect(receiver.deliveries.map((d) => d.path)).toEqual(['/first', '/second']);
      expect(deliveries.every((d) => d.verification.ok)).toBe(true);
      // Answered second first, but /first arrived first: it is attempt 1 of msg_same.
      expect(answered).toEqual([['/second', 2], ['/first', 1]]);
    });
  });

  it('can accept unsigned deliveries when respond says so', async () => {
    await withReceiver({ secrets: SECRET, respond: () => 202 }, async (receiver) => {
      const response = await fetch(receiver.url, { method: 'POST', headers: { 'webhook-id': 'msg_u' }, body: 'x' });
      expect(response.status).toBe(202);
      expect(await response.text()).toBe('');
      const [delivery] = await receiver.waitForDeliveries(1);
      expect(delivery!.status).toBe(202);
      expect(delivery!.verification.ok).toBe(false);
    });
  });

  it('rejects waitForDeliveries with a clear message on timeout, listing what arrived', async () => {
    await withReceiver({ secrets: SECRET }, async (receiver) => {
      await fetch(await signedRequest(`${receiver.url}/x`, { secret: SECRET, body: {}, id: 'msg_only' }));
      const started = Date.now();
      await expect(receiver.waitForDeliveries(2, { timeoutMs: 150 })).rejects.toThrow(
        `expected 2 deliveries at ${receiver.url} within 150 ms, but 1 arrived:\n  #1 POST /x webhook-id "msg_only": verified, answered 204`,
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(140);
      await expect(receiver.waitForDeliveries(1, { timeoutMs: 0 })).rejects.toThrow(new RangeError('timeoutMs must be a positive number of milliseconds'));
      await expect(receiver.waitForDeliveries(-1)).rejects.toThrow(new RangeError('count must be a whole number of deliveries'));
    });
    await withReceiver({ secrets: SECRET }, async (receiver) => {
      await expect(receiver.waitForDeliveries(1, { timeoutMs: 50 })).rejects.toThrow(`expected 1 delivery at ${receiver.url} within 50 ms, but none arrived`);
    });
  });

  it('resolves waiters as deliveries arrive', async () => {
    await withReceiver({ secrets: SECRET }, async (receiver) => {
      const waiting = receiver.waitForDeliveries(2, { timeoutMs: 5000 });
      await fetch(await signedRequest(receiver.url, { secret: SECRET, body: {}, id: 'msg_1' }));
      await fetch(await signedRequest(receiver.url, { secret: SECRET, body: {}, id: 'msg_2' }));
      const deliveries = await waiting;
      expect(deliveries.map((d) => d.verification.ok && d.verification.webhook.id)).toEqual(['msg_1', 'msg_2']);
    });
  });

  it('reports a respond() that throws or returns a bad status: 500 to the sender, a rejection to the test', async () => {
    await withReceiver({ secrets: SECRET, respond: () => 42 }, async (receiver) => {
      const response = await fetch(await signedRequest(receiver.url, { secret: SECRET, body: {} }));
      expect(response.status).toBe(500);
      await expect(receiver.waitForDeliveries(1)).rejects.toThrow(
        "the test receiver's respond() failed: respond returned 42 for delivery #1; it must return an HTTP status from 200 to 599",
      );
      expect(receiver.deliveries.map((d) => d.status)).toEqual([500]);
    });
    await withReceiver(
      {
        secrets: SECRET,
        respond: () => {
          throw new Error('boom');
        },
      },
      async (receiver) => {
        // A waiter already pending is rejected as soon as respond() fails.
        const waiting = expect(receiver.waitForDeliveries(3, { timeoutMs: 5000 })).rejects.toThrow("the test receiver's respond() failed: boom");
        const response = await fetch(await signedRequest(receiver.url, { secret: SECRET, body: {} }));
        expect(response.status).toBe(500);
        await waiting;
      },
    );
  });

  it('refuses a body over 1 MiB with 413, declared or streamed, without buffering it', async () => {
    await withReceiver({ secrets: SECRET }, async (receiver) => {
      const big = new Uint8Array(1024 * 1024 + 1).fill(0x61);
      const declared = await fetch(await signedRequest(receiver.url, { secret: SECRET, body: big, id: 'msg_big' }));
      expect(declared.status).toBe(413);
      expect(await declared.json()).toEqual({ error: 'PAYLOAD_TOO_LARGE', message: 'request body is 1048577 bytes, over the limit of 1048576 bytes (maxBodyBytes)' });

      // Chunked, no content-length: the receiver stops reading at the limit and closes.
      const port = Number(new URL(receiver.url).port);
      const status = await new Promise<number | string>((resolve) => {
        const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'webhook-id': 'msg_stream', 'transfer-encoding': 'chunked' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
        const chunk = new Uint8Array(64 * 1024).fill(0x62);
        let sent = 0;
        const pump = () => {
          // Bounded: 40 chunks (2.5 MiB) at most, whatever the receiver does.
          while (sent < 40 && req.write(chunk)) sent++;
          if (sent < 40) req.once('drain', () => ((sent += 1), pump()));
          else req.end();
        };
        pump();
      });
      expect(status).toBe(413);
      const deliveries = await receiver.waitForDeliveries(2);
      expect(deliveries.map((d) => [d.status, d.verification.ok === false && d.verification.error.code])).toEqual([
        [413, 'PAYLOAD_TOO_LARGE'],
        [413, 'PAYLOAD_TOO_LARGE'],
      ]);
      // Not read, so not recorded.
      expect(deliveries.map((d) => d.body.byteLength)).toEqual([0, 0]);
    });
  });

  it('listens on the port it is given, and stops listening on close()', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));

    const receiver = await createTestReceiver({ secrets: SECRET, port });
    expect(receiver.url).toBe(`http://127.0.0.1:${port}`);
    const pending = receiver.waitForDeliveries(1, { timeoutMs: 5000 });
    await receiver.close();
    await expect(pending).rejects.toThrow('the test receiver was closed while waiting for 1 deliveries; 0 arrived');
    await receiver.close();
    await expect(fetch(receiver.url, { method: 'POST', body: 'x' })).rejects.toThrow(TypeError);
    await expect(receiver.waitForDeliveries(1)).rejects.toThrow('the test receiver is closed; 0 of 1 deliveries arrived');
  });

  it('refuses bad options at once', async () => {
    await expect(createTestReceiver({ secrets: 'not base64!' })).rejects.toThrow(TypeError);
    await expect(createTestReceiver({ secrets: SECRET, port: 70000 })).rejects.toThrow(new RangeError('port must be a whole number from 0 to 65535 (0 or none: a free port)'));
    await expect(createTestReceiver({ secrets: SECRET, respond: 204 as unknown as () => number })).rejects.toThrow(
      new TypeError('respond must be a function (delivery, attempt) => status'),
    );
    await expect(createTestReceiver(undefined as unknown as { secrets: string })).rejects.toThrow(TypeError);
  });
});
