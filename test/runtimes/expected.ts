/**
 * What the smoke suite (smoke.ts) must observe on every runtime and every Node line: the same
 * outcomes, word for word. Shared by the Bun, Deno and workerd runs (runtimes.test.ts) and the
 * runs of the built package on each Node line (test/lines/built-package.test.ts).
 */

import { expect } from 'vitest';
import type { Reply, SmokeReport } from './smoke.ts';

export const mismatch = { error: 'SIGNATURE_MISMATCH', message: expect.stringMatching(/^no signature matched: /) };
export const json = (status: number, body: unknown): Reply => ({ status, contentType: 'application/json', body });

/** What the suite must observe on every runtime. */
export const expected = {
  core: {
    vector: { id: 'msg_p5jXN8AQM9LWM0D4loKWxJek', scheme: 'v1', keyIndex: 0, json: { test: 2432232314 } },
    vectorTampered: 'SIGNATURE_MISMATCH',
    v1: { id: 'msg_smoke_v1', scheme: 'v1', signature: ['v1'], text: '{"type":"invoice.paid","data":{"id":"in_1"}}' },
    v1a: { id: 'msg_smoke_v1a', scheme: 'v1a', keyId: 'ed25519-key', signature: ['v1a'] },
    v1aTampered: 'SIGNATURE_MISMATCH',
    v1AndV1a: { entries: ['v1', 'v1a'], byPublicKey: 'v1a', bySecret: 'v1' },
    rotation: { duringRotation: 'next', previousOnly: 'prev', retiredOnly: 'SIGNATURE_MISMATCH' },
    staleTimestamp: 'TIMESTAMP_TOO_OLD',
    futureTimestamp: 'TIMESTAMP_TOO_NEW',
    millisecondTimestamp: 'INVALID_TIMESTAMP',
    missingSignature: 'MISSING_SIGNATURE',
    unsignedAccepted: { signed: false, scheme: null },
    receiver: { outcomes: ['processed', 'duplicate'], runs: 1 },
  },
  hono: {
    valid: json(200, { id: 'msg_hono_1', keyId: 'hono-key', type: 'invoice.paid' }),
    duplicate: json(200, { duplicate: true }),
    tampered: json(401, mismatch),
    unsigned: json(401, { error: 'MISSING_SIGNATURE', message: expect.stringContaining('webhook-signature header is missing') }),
    concurrent: { handlerRuns: 1, processed: 1 },
    handlerRuns: 2,
  },
  fetch: {
    v1a: json(200, { id: 'msg_fetch_1', scheme: 'v1a', keyId: 'ed25519-key' }),
    duplicate: json(200, { duplicate: true }),
    v1: json(200, { id: 'msg_fetch_2', scheme: 'v1', keyId: 'hmac-key' }),
    noContent: { status: 204, contentType: null, body: '' },
    tampered: json(401, mismatch),
    handlerRuns: 3,
  },
};

export const checks = (report: SmokeReport): Pick<SmokeReport, 'core' | 'hono' | 'fetch'> => ({ core: report.core, hono: report.hono, fetch: report.fetch });

