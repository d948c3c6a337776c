/**
 * `webhook-receiver relay rotate`, `relay deliveries` and `replay --event-id` through the real
 * command, against the emulator over HTTP. No output of any run may hold the API key.
 */

import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { relayEmulator, type RelayEmulator } from '../../src/testing/index.ts';
import { verifyWebhook } from '../../src/verify.ts';
import { SECRET } from '../testing/support.ts';
import { run, type Result } from '../cli/support.ts';
import { KEY, OTHER_KEY, expectNoKeyShown, record, tinyServer } from './support.ts';

let emulator: RelayEmulator;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relay-cli-'));
});

beforeEach(async () => {
  emulator = await relayEmulator({ apiKeys: [{ key: KEY }] });
});

afterEach(async () => {
  await emulator.close();
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  expectNoKeyShown();
});

/** Runs the command with the relay configured from the environment, and records what it printed. */
async function cli(args: string[], env: Record<string, string> = {}): Promise<Result> {
  const result = await run(args, { env: { RELAY_URL: emulator.url, RELAY_API_KEY: KEY, ...env }, timeoutMs: 60_000 });
  record(result.stdout);
  record(result.stderr);
  expect(result.stdout + result.stderr).not.toContain(KEY);
  return result;
}

const rotations = () => emulator.requests.filter((request) => request.method === 'POST');

describe('relay rotate', () => {
  it('refuses an API key on the command line, saying why, without repeating it', async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    for (const args of [['--api-key', KEY], [`--api-key=${KEY}`]]) {
      const result = await cli(['relay', 'rotate', '--destination', destination.id, '--out', join(dir, 'never.json'), ...args]);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/RELAY_API_KEY only.*shell history/);
    }
    expect(emulator.requests).toEqual([]);
  });

  it('refuses an existing file before rotating, and replaces it with --force (0600, --print)', async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    const out = join(dir, 'existing.json');
    writeFileSync(out, 'keep me', { mode: 0o644 });
    const refused = await cli(['relay', 'rotate', '--destination', destination.id, '--out', out]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--force');
    expect(rotations()).toEqual([]);
    expect(readFileSync(out, 'utf8')).toBe('keep me');

    const forced = await cli(['relay', 'rotate', '--destination', destination.id, '--out', out, '--force', '--print']);
    expect(forced.code).toBe(0);
    const file = JSON.parse(readFileSync(out, 'utf8')) as { keyId: string; signingSecret: string };
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(forced.stdout).toContain(file.signingSecret);
    expect(forced.stdout).toContain(`keyId ${file.keyId}`);
    expect(forced.stdout).toMatch(/Deploy the new secret now, listed first/);
    expect(rotations()).toHaveLength(1);
  });

  it('a rotation whose answer never came: exit 1, says it may have happened, one request, no file left', async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    const out = join(dir, 'dropped.json');
    emulator.failNext(1, { drop: true });
    const result = await cli(['relay', 'rotate', '--destination', destination.id, '--out', out]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('NETWORK_ERROR');
    expect(result.stderr).toMatch(/may or may not have happened.*Rotate again/s);
    expect(rotations()).toHaveLength(1);
    expect(existsSync(out)).toBe(false);
  });

  it('a wrong key: exit 1 with UNAUTHORIZED and the request id, the key never shown', async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    const result = await cli(['relay', 'rotate', '--destination', destination.id, '--out', join(dir, 'wrong.json')], { RELAY_API_KEY: OTHER_KEY });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/UNAUTHORIZED.*request id req_/);
    expect(result.stderr).not.toContain(OTHER_KEY);
  });

  it('gives up within --timeout when the relay never answers', async () => {
    const silent = await tinyServer(() => {
      // Never answers.
    });
    try {
      const result = await cli(['relay', 'rotate', '--destination', '0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80', '--out', join(dir, 'silent.json'), '--timeout', '1'], { RELAY_URL: silent.url });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/TIMEOUT|ABORTED/);
      expect(result.stderr).toMatch(/may or may not have happened/);
    } finally {
      await silent.close();
    }
  });

  it('is misuse without RELAY_API_KEY, with an http URL that is not loopback, or with a bad id', async () => {
    const out = join(dir, 'misuse.json');
    expect((await cli(['relay', 'rotate', '--destination', '0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80', '--out', out], { RELAY_API_KEY: '' })).stderr).toContain('set RELAY_API_KEY');
    expect((await cli(['relay', 'rotate', '--destination', '0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80', '--out', out], { RELAY_URL: 'http://relay.example.com' })).code).toBe(2);
    expect((await cli(['relay', 'rotate', '--destination', 'nope', '--out', out])).code).toBe(2);
    expect(emulator.requests).toEqual([]);
  });
});

describe('replay --event-id', () => {
  it('fetches the event and its body, leaves out credentials and old signatures, and re-signs', async () => {
    const body = new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x31, 0x7d, 0x00, 0xff]);
    const event = emulator.addEvent({
      body,
      contentType: 'application/octet-stream',
      headers: [
        ['Content-Type', 'application/octet-stream'],
        ['Authorization', 'Bearer sender-token'],
        ['Cookie', 'session=abc'],
        ['X-Api-Key', 'sender-key'],
        ['webhook-signature', 'v1,b2xk'],
        ['Stripe-Signature', 't=1,v1=abc'],
        ['X-Hub-Signature-256', 'sha256=abc'],
        ['X-Custom', 'kept'],
      ],
    });
    const received: { method: string; headers: Record<string, string | string[] | undefined>; body: Buffer }[] = [];
    const target = await tinyServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({ method: req.method ?? '', headers: req.headers, body: Buffer.concat(chunks) });
        res.writeHead(204).end();
      });
    });
    try {
      const result = await cli(['replay', '--event-id', event.id, '--to', `${target.url}/hooks`], { WEBHOOK_SECRET: SECRET });
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('left out the captured authorization, cookie, x-api-key, webhook-signature, stripe-signature, x-hub-signature-256');
      expect(received).toHaveLength(1);
      const [got] = received;
      expect(got!.method).toBe('POST');
      expect(new Uint8Array(got!.body)).toEqual(body);
      for (const name of ['authorization', 'cookie', 'x-api-key', 'stripe-signature', 'x-hub-signature-256']) expect(got!.headers[name]).toBeUndefined();
      expect(got!.headers['x-custom']).toBe('kept');
      expect(got!.headers['webhook-id']).toBe(event.id);
      const verified = await verifyWebhook({ headers: got!.headers as Record<string, string>, body: new Uint8Array(got!.body) }, { secrets: SECRET });
      expect(verified.id).toBe(event.id);
    } finally {
      await target.close();
    }
  });

  it('refuses an event whose method was not recorded unless --method is given', async () => {
    const event = emulator.addEvent({ body: '{}', method: null });
    const methods: string[] = [];
    const target = await tinyServer((req, res) => {
      methods.push(req.method ?? '');
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    try {
      const refused = await cli(['replay', '--event-id', event.id, '--to', target.url, '--unsigned']);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('--method');
      expect(methods).toEqual([]);
      const sent = await cli(['replay', '--event-id', event.id, '--to', target.url, '--unsigned', '--method', 'put']);
      expect(sent.code).toBe(0);
      expect(methods).toEqual(['PUT']);
    } finally {
      await target.close();
    }
  });

  it('refuses --api-key, and reports a missing event with the request id', async () => {
    const refused = await cli(['replay', '--event-id', '0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80', '--to', 'http://127.0.0.1:9/x', '--unsigned', '--api-key', KEY]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('RELAY_API_KEY only');
    const missing = await cli(['replay', '--event-id', '0190b6a2-4c8e-7d4a-9f3b-2a1c5e6d7f80', '--to', 'http://127.0.0.1:9/x', '--unsigned']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/NOT_FOUND.*request id req_/);
  });
});

describe('relay deliveries', () => {
  it('lists deliveries with their status, attempt, code, error and next retry, and how to replay each', async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    const event = emulator.addEvent({ body: '{}' });
    const dead = emulator.addDelivery({ eventId: event.id, destinationId: destination.id, status: 'dead', attempt: 8, statusCode: 503, error: 'upstream unavailable' });
    emulator.addDelivery({ eventId: event.id, destinationId: destination.id, status: 'delivered', statusCode: 204 });
    const failed = emulator.addDelivery({ eventId: event.id, destinationId: destination.id, status: 'failed', attempt: 2, statusCode: 500, nextRetryAt: new Date('2030-01-01T00:00:00Z') });
    const result = await cli(['relay', 'deliveries', '--destination', destination.id, '--status', 'dead', '--status', 'failed']);
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n');
    const deadLine = lines.findIndex((line) => line.includes(`delivery ${dead.id}`));
    const failedLine = lines.findIndex((line) => line.includes(`delivery ${failed.id}`));
    expect(deadLine).toBeGreaterThanOrEqual(0);
    expect(failedLine).toBeGreaterThan(deadLine);
    expect(lines[deadLine]).toMatch(/dead {2}attempt 8 {2}status code 503 {2}next retry - .*error "upstream unavailable"/);
    expect(lines[failedLine]).toContain('next retry 2030-01-01T00:00:00.000Z');
    expect(lines[deadLine + 1]).toBe(`  replay: webhook-receiver replay --event-id ${event.id} --to <your endpoint URL>`);
    expect(result.stdout).toContain('2 deliveries');
    expect(result.stdout).toMatch(/does not publish which webhook-id its own delivery carried/);
    expect(result.stdout).not.toContain('delivered');

    const future = await cli(['relay', 'deliveries', '--since', '2099-01-01T00:00:00Z']);
    expect(future.code).toBe(0);
    expect(future.stdout).toContain('0 deliveries created since 2099-01-01T00:00:00.000Z (3 older left out)');
    expect((await cli(['relay', 'deliveries', '--status', 'gone'])).code).toBe(2);
  });
});
