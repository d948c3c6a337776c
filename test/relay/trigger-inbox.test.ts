/**
 * `triggerSource` into a real BullMQ inbox (the receiver accepts, a worker runs the handler), the
 * job format's versions (a pulled event's job is format 2; a format 1 job still runs), and the
 * cursor stores: the file (atomic replace) and the key-value seam on a real Redis.
 */

import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createReceiver, INBOX_JOB_FORMAT, type VerifiedWebhook } from '../../src/index.ts';
import { bullmqInbox } from '../../src/inbox/bullmq.ts';
import { hexJobId } from '../../src/inbox/job.ts';
import { redisStore } from '../../src/stores/redis.ts';
import { fileCursor, keyValueCursor, relayClient, triggerSource, type PulledEventReport } from '../../src/relay/index.ts';
import { relayEmulator, type RelayEmulator } from '../../src/testing/index.ts';
import { connectIORedis, sharedRedisUrl } from '../support/redis.ts';
import { SECRET } from '../testing/support.ts';
import { KEY, expectNoKeyShown, record, recordAll } from './support.ts';

const available = sharedRedisUrl !== null;
const quiet = { warn: () => {}, error: () => {} };
const connections: { disconnect(): void }[] = [];
let emulator: RelayEmulator;
let dir: string;

beforeEach(async () => {
  emulator = await relayEmulator({ apiKeys: [{ key: KEY }] });
  dir = await mkdtemp(join(tmpdir(), 'relay-cursor-'));
});

afterEach(async () => {
  await emulator.close();
  await rm(dir, { recursive: true, force: true });
});

afterAll(() => {
  for (const connection of connections) connection.disconnect();
  expectNoKeyShown();
});

async function redis() {
  const client = await connectIORedis(sharedRedisUrl!);
  connections.push(client);
  return client;
}

/** Waits until `check` holds, checking after each of the worker's jobs. */
function until(check: () => boolean, signal: { wake?: () => void }): Promise<void> {
  return new Promise((resolve) => {
    if (check()) return resolve();
    signal.wake = () => {
      if (check()) resolve();
    };
  });
}

describe.skipIf(!available)('triggerSource into a BullMQ inbox', () => {
  it('accepts pulled events as format 2 jobs; the worker hands the handler the relay webhook, each once', { timeout: 60_000 }, async () => {
    const client = await redis();
    const queue = new Queue(`pull-${randomBytes(6).toString('hex')}`, { connection: client, prefix: 'test-pull' });
    const prefix = `test-pull-${randomBytes(4).toString('hex')}:`;
    const store = redisStore({ client, prefix });
    const inbox = bullmqInbox({ queue, backoff: { delayMs: 0 }, logger: quiet });
    const verified = emulator.addEvent({ body: '{"type":"a"}', verificationState: 'verified' });
    const first = emulator.addEvent({ body: '{"type":"b"}', dedupKey: 'msg_sender_7', dedupStrategy: 'provider_event_id' });
    const second = emulator.addEvent({ body: '{"type":"b"}', dedupKey: 'msg_sender_7', dedupStrategy: 'provider_event_id' });
    const unattempted = emulator.addEvent({ body: '{"type":"c"}', verificationState: 'unattempted' });
    const triggerId = emulator.addTrigger();
    const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept', inbox, idempotency: { store } });
    const reports: PulledEventReport[] = [];
    const source = triggerSource({
      relay: relayClient({ baseUrl: emulator.url, apiKey: KEY }),
      triggerId,
      cursor: keyValueCursor({ kv: client, key: `${prefix}cursor` }),
      receiver,
      onEvent: (report) => reports.push(report),
      onError: (error) => recordAll(error),
    });
    const seen: VerifiedWebhook[] = [];
    const waker: { wake?: () => void } = {};
    let worker: { close(): Promise<void> } | undefined;
    try {
      expect(() => triggerSource({ relay: relayClient({ baseUrl: emulator.url, apiKey: KEY }), triggerId, cursor: fileCursor(join(dir, 'c')), receiver, handler: () => {} })).toThrow(/inbox/);
      await source.pollOnce();
      expect(reports.map((report) => report.outcome)).toEqual(['enqueued', 'enqueued', 'duplicate', 'enqueued']);
      // Read before a worker runs it (a processed job is removed).
      const job = await queue.getJob(await hexJobId(`default:s:${verified.id}`));
      expect(job?.data).toMatchObject({ v: 2, id: verified.id, scheme: 'relay', signed: true, verificationState: 'verified', relayEventId: verified.id, keyIndex: null, keyId: null });
      record(JSON.stringify(job?.data));
      worker = await inbox.work(
        (webhook) => {
          seen.push(webhook);
          waker.wake?.();
        },
        { idempotency: { store }, logger: quiet },
      );
      await until(() => seen.length === 3, waker);
      const byEvent = new Map(seen.map((webhook) => [webhook.relayEventId, webhook]));
      expect(byEvent.get(verified.id)).toMatchObject({ id: verified.id, scheme: 'relay', signed: true, verificationState: 'verified' });
      expect(byEvent.get(first.id)).toMatchObject({ id: 'msg_sender_7', verificationState: 'verified' });
      expect(byEvent.has(second.id)).toBe(false);
      expect(byEvent.get(unattempted.id)).toMatchObject({ signed: false, scheme: 'relay', verificationState: 'unattempted' });
      expect(byEvent.get(verified.id)!.json()).toEqual({ type: 'a' });
      // The cursor is in Redis, under the key given.
      expect(await client.get(`${prefix}cursor`)).toMatch(/.+/);
    } finally {
      await worker?.close();
      await inbox.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('a worker of this release still runs a format 1 job (written by the previous release)', { timeout: 60_000 }, async () => {
    expect(INBOX_JOB_FORMAT).toBe(2);
    const client = await redis();
    const queue = new Queue(`pull-v1-${randomBytes(6).toString('hex')}`, { connection: client, prefix: 'test-pull' });
    const inbox = bullmqInbox({ queue, backoff: { delayMs: 0 }, logger: quiet });
    // A format 1 job as the previous release wrote it, word for word.
    const v1 = {
      v: 1,
      id: 'msg_written_by_1',
      timestamp: 1_700_000_000,
      body: Buffer.from('{"old":true}').toString('base64'),
      contentType: 'application/json',
      signed: true,
      scheme: 'v1',
      keyIndex: 0,
      keyId: null,
      namespace: 'default',
      tenant: null,
      entity: null,
      acceptedAt: 1_700_000_000_250,
    };
    await queue.add('webhook', v1, { jobId: await hexJobId('default:s:msg_written_by_1') });
    const seen: VerifiedWebhook[] = [];
    const waker: { wake?: () => void } = {};
    const worker = await inbox.work(
      (webhook) => {
        seen.push(webhook);
        waker.wake?.();
      },
      { logger: quiet },
    );
    try {
      await until(() => seen.length === 1, waker);
      expect(seen[0]).toMatchObject({ id: 'msg_written_by_1', scheme: 'v1', signed: true, keyIndex: 0 });
      expect(seen[0]!.verificationState).toBeUndefined();
      expect(seen[0]!.json()).toEqual({ old: true });
    } finally {
      await worker.close();
      await inbox.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});

describe('cursor stores', () => {
  it('fileCursor: nothing before the first save, then the cursor, replaced whole (0600, no temporary left)', async () => {
    const path = join(dir, 'trigger.cursor');
    const cursor = fileCursor(path);
    expect(await cursor.load()).toBeUndefined();
    await cursor.save('cursor-one');
    expect(await cursor.load()).toBe('cursor-one');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    await cursor.save('cursor-two');
    expect(await readFile(path, 'utf8')).toBe('cursor-two\n');
    expect(await readdir(dir)).toEqual(['trigger.cursor']);
    await writeFile(path, '');
    expect(await cursor.load()).toBeUndefined();
    await expect(cursor.save('two\nlines')).rejects.toThrow(TypeError);
    expect(() => fileCursor('')).toThrow(TypeError);
  });

  it("fileCursor: a save that cannot be placed rejects with the file system's error and leaves no temporary file", async () => {
    const path = join(dir, 'missing-folder', 'trigger.cursor');
    await expect(fileCursor(path).save('x')).rejects.toMatchObject({ code: 'ENOENT' });
    // Written and flushed, but a folder is in the way of the rename: the temporary file goes too.
    const blocked = join(dir, 'blocked.cursor');
    await mkdir(join(blocked, 'inside'), { recursive: true });
    await expect(fileCursor(blocked).save('y')).rejects.toMatchObject({ code: expect.stringMatching(/^(EISDIR|ENOTEMPTY|EEXIST)$/) });
    expect(await readdir(dir)).toEqual(['blocked.cursor']);
  });

  it.skipIf(!available)('keyValueCursor on a Redis client (set) and on a put-style store', async () => {
    const client = await redis();
    const key = `test-cursor-${randomBytes(4).toString('hex')}`;
    const onRedis = keyValueCursor({ kv: client, key });
    expect(await onRedis.load()).toBeUndefined();
    await onRedis.save('c1');
    expect(await client.get(key)).toBe('c1');
    expect(await onRedis.load()).toBe('c1');
    await client.del(key);

    const map = new Map<string, string>();
    const putStyle = keyValueCursor({ kv: { get: async (k: string) => map.get(k) ?? null, put: async (k: string, v: string) => void map.set(k, v) }, key: 'k' });
    await putStyle.save('c2');
    expect(await putStyle.load()).toBe('c2');
    expect(() => keyValueCursor({ kv: { get: async () => null }, key: 'k' })).toThrow(/set\(key, value\)/);
    expect(() => keyValueCursor({ kv: client, key: '' })).toThrow(TypeError);
  });
});
