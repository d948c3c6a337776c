/**
 * `triggerSource` with a handler run directly, against the relay emulator over HTTP: the webhook a
 * handler gets, the claims (dedupKey joins two captures), the verification states, inline and
 * fetched bodies, the cursor saved only after a whole batch, the backoff (an injected sleep that
 * records what it was asked to wait, so nothing sleeps), and close() bounds. No output may hold
 * the API key.
 */

import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createReceiver, type OutcomeEvent, type VerifiedWebhook } from '../../src/index.ts';
import { PermanentError } from '../../src/errors.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import { relayClient, triggerSource, type CursorStore, type PulledEventReport, type TriggerErrorContext } from '../../src/relay/index.ts';
import { relayEmulator, type RelayEmulator } from '../../src/testing/index.ts';
import { SECRET } from '../testing/support.ts';
import { KEY, expectNoKeyShown, record, recordAll, tinyServer } from './support.ts';

let emulator: RelayEmulator;

beforeEach(async () => {
  emulator = await relayEmulator({ apiKeys: [{ key: KEY }] });
});

afterEach(async () => {
  await emulator.close();
});

afterAll(() => {
  expectNoKeyShown();
});

/** A cursor in memory that counts its saves. */
function memoryCursor(): CursorStore & { saved: string[] } {
  const saved: string[] = [];
  return {
    saved,
    load: async () => saved.at(-1),
    save: async (cursor) => {
      saved.push(cursor);
    },
  };
}

function client(options: { retryBudgetMs?: number } = {}) {
  return relayClient({ baseUrl: emulator.url, apiKey: KEY, retryBudgetMs: options.retryBudgetMs ?? 0 });
}

/** What a source reported, recorded as text a person could see. */
function listeners() {
  const events: PulledEventReport[] = [];
  const errors: { error: unknown; context: TriggerErrorContext }[] = [];
  return {
    reported: events,
    failures: errors,
    onEvent: (report: PulledEventReport) => {
      events.push(report);
      record(JSON.stringify(report));
    },
    onError: (error: unknown, context: TriggerErrorContext) => {
      errors.push({ error, context });
      recordAll(error);
    },
  };
}

const payloadFetches = () => emulator.requests.filter((request) => request.path.endsWith('/payload')).length;

describe('triggerSource with a handler', () => {
  it('hands the handler the same Webhook a pushed delivery is, with scheme relay and the verification state', async () => {
    const receivedAt = new Date('2026-11-28T09:15:30.750Z');
    const event = emulator.addEvent({ body: '{"type":"invoice.paid","n":1}', verificationState: 'verified', receivedAt });
    const authenticated = emulator.addEvent({ body: '{"type":"invoice.paid","n":2}', verificationState: 'authenticated' });
    const triggerId = emulator.addTrigger();
    const seen: VerifiedWebhook[] = [];
    const outcomes: OutcomeEvent[] = [];
    const receiver = createReceiver({ secrets: SECRET, onOutcome: (outcome) => outcomes.push(outcome) });
    const cursor = memoryCursor();
    const { reported: events, onEvent, onError } = listeners();
    const source = triggerSource({ relay: client(), triggerId, cursor, receiver, handler: (webhook) => void seen.push(webhook), onEvent, onError });

    const result = await source.pollOnce();
    expect(result).toMatchObject({ events: 2, caughtUp: true });
    expect(seen).toHaveLength(2);
    const [first, second] = seen as [VerifiedWebhook, VerifiedWebhook];
    expect(first.id).toBe(event.id);
    expect(first.relayEventId).toBe(event.id);
    expect(first.scheme).toBe('relay');
    expect(first.signed).toBe(true);
    expect(first.verificationState).toBe('verified');
    expect(first.timestamp.toISOString()).toBe('2026-11-28T09:15:30.000Z');
    expect(first.json()).toEqual({ type: 'invoice.paid', n: 1 });
    expect(first.text()).toBe('{"type":"invoice.paid","n":1}');
    expect(second.id).toBe(authenticated.id);
    expect(second.verificationState).toBe('authenticated');
    expect(second.signed).toBe(true);
    expect(events.map((report) => report.outcome)).toEqual(['processed', 'processed']);
    // The receiver's own telemetry counted them as it counts pushed deliveries.
    expect(outcomes.map((outcome) => outcome.outcome)).toEqual(['processed', 'processed']);
    expect(cursor.saved).toEqual([result.cursor]);

    // Polled again from the saved cursor: nothing new, nothing run twice.
    expect(await source.pollOnce()).toMatchObject({ events: 0, caughtUp: true });
    expect(seen).toHaveLength(2);
  });

  it('runs an unattempted event only when the receiver accepts unsigned ones, and never a failed one', async () => {
    const unattempted = emulator.addEvent({ body: '{"n":"u"}', verificationState: 'unattempted' });
    const failed = emulator.addEvent({ body: '{"n":"f"}', verificationState: 'failed' });
    const triggerId = emulator.addTrigger();

    const seen: VerifiedWebhook[] = [];
    const strict = listeners();
    const refusing = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), handler: (webhook) => void seen.push(webhook), ...strict });
    await refusing.pollOnce();
    expect(seen).toEqual([]);
    expect(strict.reported).toEqual([
      expect.objectContaining({ eventId: unattempted.id, outcome: 'skipped', verificationState: 'unattempted', reason: expect.stringMatching(/MISSING_SIGNATURE/) }),
      expect.objectContaining({ eventId: failed.id, outcome: 'skipped', verificationState: 'failed' }),
    ]);

    const lenient = listeners();
    const accepting = triggerSource({
      relay: client(),
      triggerId,
      cursor: memoryCursor(),
      receiver: createReceiver({ secrets: SECRET, unsigned: 'accept' }),
      handler: (webhook) => void seen.push(webhook),
      ...lenient,
    });
    await accepting.pollOnce();
    expect(seen.map((webhook) => [webhook.relayEventId, webhook.signed, webhook.verificationState])).toEqual([[unattempted.id, false, 'unattempted']]);
    expect(lenient.reported.map((report) => report.outcome)).toEqual(['processed', 'skipped']);
  });

  it('claims unattempted events in the unsigned key space, the one the unsigned budget bounds', async () => {
    const unsigned = emulator.addEvent({ body: '{"n":1}', verificationState: 'unattempted' });
    const signed = emulator.addEvent({ body: '{"n":2}', verificationState: 'verified' });
    const triggerId = emulator.addTrigger();
    const store = memoryStore();
    const claimed: string[] = [];
    // The real store, its claims' keys noted on the way through.
    const noting = { ...store, claim: (key: string, lockMs: number) => (claimed.push(key), store.claim(key, lockMs)) };
    const receiver = createReceiver({ secrets: SECRET, unsigned: 'accept', idempotency: { store: noting } });
    const source = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver, handler: () => {}, ...listeners() });
    await source.pollOnce();
    expect(claimed).toEqual([`default:u:${unsigned.id}`, `default:s:${signed.id}`]);
  });

  it('claims by dedupKey for the sender-id strategies, so two captures of one sender event run once', async () => {
    const first = emulator.addEvent({ body: '{"capture":1}', dedupKey: 'msg_sender_42', dedupStrategy: 'sw_webhook_id' });
    const second = emulator.addEvent({ body: '{"capture":2}', dedupKey: 'msg_sender_42', dedupStrategy: 'sw_webhook_id' });
    const hashA = emulator.addEvent({ body: '{"same":true}', dedupKey: 'sha256:abc', dedupStrategy: 'content_hash' });
    const hashB = emulator.addEvent({ body: '{"same":true}', dedupKey: 'sha256:abc', dedupStrategy: 'content_hash' });
    const triggerId = emulator.addTrigger();
    const seen: string[] = [];
    const { reported: events, onEvent, onError } = listeners();
    const source = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), handler: (webhook) => void seen.push(`${webhook.id}/${webhook.relayEventId}`), onEvent, onError });
    await source.pollOnce();
    // The content hash joins nothing by default: two identical bodies may be two events.
    expect(seen).toEqual([`msg_sender_42/${first.id}`, `${hashA.id}/${hashA.id}`, `${hashB.id}/${hashB.id}`]);
    expect(events.map((report) => [report.eventId, report.webhookId, report.outcome])).toEqual([
      [first.id, 'msg_sender_42', 'processed'],
      [second.id, 'msg_sender_42', 'duplicate'],
      [hashA.id, hashA.id, 'processed'],
      [hashB.id, hashB.id, 'processed'],
    ]);

    // Asked for, content_hash keys join too.
    const joined: string[] = [];
    const optedIn = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), dedupBy: ['content_hash'], handler: (webhook) => void joined.push(webhook.id), onError });
    await optedIn.pollOnce();
    expect(joined).toEqual([first.id, second.id, 'sha256:abc']);
  });

  it('uses an inline body only when it is utf8 and whole; fetches binary and cut bodies, byte for byte', async () => {
    const binary = new Uint8Array(300);
    for (let i = 0; i < binary.length; i++) binary[i] = (i * 37 + 11) % 256;
    binary[0] = 0xff;
    const small = emulator.addEvent({ body: '{"small":true}' });
    const cut = emulator.addEvent({ body: `{"big":"${'é'.repeat(200)}"}` });
    const raw = emulator.addEvent({ body: binary, contentType: 'application/octet-stream' });
    const triggerId = emulator.addTrigger();
    const seen = new Map<string, { body: Uint8Array }>();
    const source = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), maxInlineBytes: 64, handler: (webhook) => void seen.set(webhook.relayEventId!, { body: webhook.body }), ...listeners() });
    await source.pollOnce();
    expect(new TextDecoder().decode(seen.get(small.id)!.body)).toBe('{"small":true}');
    expect(new TextDecoder().decode(seen.get(cut.id)!.body)).toBe(`{"big":"${'é'.repeat(200)}"}`);
    expect(Buffer.from(seen.get(raw.id)!.body).equals(Buffer.from(binary))).toBe(true);
    // Only the cut and the binary body were fetched.
    expect(payloadFetches()).toBe(2);
    const fetched = emulator.requests.filter((request) => request.path.endsWith('/payload')).map((request) => request.path);
    expect(fetched).toEqual([`/v1/events/${cut.id}/payload`, `/v1/events/${raw.id}/payload`]);
  });

  it('keeps a UTF-8 body that begins with a byte order mark byte for byte, inline', async () => {
    const bom = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('{"bom":true}')]);
    const event = emulator.addEvent({ body: bom });
    const triggerId = emulator.addTrigger();
    const bodies: Uint8Array[] = [];
    const source = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), handler: (webhook) => void bodies.push(webhook.body), ...listeners() });
    await source.pollOnce();
    expect(payloadFetches()).toBe(0);
    expect(bodies.map((body) => Buffer.from(body).toString('hex'))).toEqual([Buffer.from(bom).toString('hex')]);
    expect(event.payloadBytes).toBe(bom.byteLength);
  });

  it('saves the cursor only after the whole batch: a crash mid-batch replays it, and the claims run each event once', async () => {
    const ids = Array.from({ length: 5 }, (_, n) => emulator.addEvent({ body: JSON.stringify({ n }) }).id);
    const triggerId = emulator.addTrigger();
    const store = memoryStore();
    const cursor = memoryCursor();
    const runs: string[] = [];
    // The first process "dies" in its third event: its handler never returns, and it is abandoned.
    const crashed = triggerSource({
      relay: client(),
      triggerId,
      cursor,
      receiver: createReceiver({ secrets: SECRET, idempotency: { store } }),
      handler: async (webhook) => {
        if (webhook.id === ids[2]) throw new Error('the process died here');
        runs.push(webhook.id);
      },
      ...listeners(),
    });
    await expect(crashed.pollOnce()).rejects.toThrow('the process died here');
    expect(cursor.saved).toEqual([]);
    expect(runs).toEqual(ids.slice(0, 2));

    // The next process starts from the same cursor and the same store.
    const { reported: events, onEvent, onError } = listeners();
    const next = triggerSource({ relay: client(), triggerId, cursor, receiver: createReceiver({ secrets: SECRET, idempotency: { store } }), handler: (webhook) => void runs.push(webhook.id), onEvent, onError });
    await next.pollOnce();
    expect(runs).toEqual(ids);
    expect(events.map((report) => report.outcome)).toEqual(['duplicate', 'duplicate', 'processed', 'processed', 'processed']);
    expect(cursor.saved).toHaveLength(1);
  });

  it('skips an event the handler refuses for good (PermanentError, INVALID_PAYLOAD) and goes on', async () => {
    const bad = emulator.addEvent({ body: 'not json' });
    const permanent = emulator.addEvent({ body: '{"permanent":true}' });
    const good = emulator.addEvent({ body: '{"ok":true}' });
    const triggerId = emulator.addTrigger();
    const cursor = memoryCursor();
    const runs: string[] = [];
    const { reported: events, failures: errors, onEvent, onError } = listeners();
    const source = triggerSource({
      relay: client(),
      triggerId,
      cursor,
      receiver: createReceiver({ secrets: SECRET }),
      handler: (webhook) => {
        const body = webhook.json<{ permanent?: boolean }>();
        if (body.permanent === true) throw new PermanentError('never processable');
        runs.push(webhook.id);
      },
      onEvent,
      onError,
    });
    await source.pollOnce();
    expect(runs).toEqual([good.id]);
    expect(events.map((report) => [report.eventId, report.outcome])).toEqual([
      [bad.id, 'skipped'],
      [permanent.id, 'skipped'],
      [good.id, 'processed'],
    ]);
    expect(errors.map(({ context }) => context)).toEqual([
      { stage: 'event', eventId: bad.id },
      { stage: 'event', eventId: permanent.id },
    ]);
    expect(cursor.saved).toHaveLength(1);
  });

  it('checks its options at once', () => {
    const receiver = createReceiver({ secrets: SECRET });
    const relay = client();
    const cursor = memoryCursor();
    const handler = () => {};
    expect(() => triggerSource({ relay, triggerId: 'nope', cursor, receiver, handler })).toThrow(TypeError);
    const triggerId = crypto.randomUUID();
    expect(() => triggerSource({ relay, triggerId, cursor, receiver })).toThrow(/pass a handler/);
    expect(() => triggerSource({ relay, triggerId, cursor: {} as CursorStore, receiver, handler })).toThrow(/cursor must be/);
    expect(() => triggerSource({ relay, triggerId, cursor, receiver: {} as typeof receiver, handler })).toThrow(/createReceiver/);
    expect(() => triggerSource({ relay, triggerId, cursor, receiver, handler, limit: 500 })).toThrow(RangeError);
    expect(() => triggerSource({ relay, triggerId, cursor, receiver, handler, dedupBy: ['sha' as 'unique'] })).toThrow(/dedupBy/);
    expect(() => triggerSource({ relay, triggerId, cursor, receiver, handler, idle: { minMs: 10, maxMs: 5 } })).toThrow(RangeError);
  });
});

describe('the loop: backoff and close()', () => {
  /** A sleep that records each wait and resolves at once; `then` runs after the n-th wait. */
  function recordingSleep(then: (waits: number[]) => void | Promise<void>) {
    const waits: number[] = [];
    return {
      waits,
      sleep: async (ms: number) => {
        waits.push(ms);
        await then(waits);
      },
    };
  }

  it('backs off while caught up, from the floor to the cap, and back to the floor once events come', async () => {
    const triggerId = emulator.addTrigger();
    const runs: string[] = [];
    let source: ReturnType<typeof triggerSource> | undefined;
    const { waits, sleep } = recordingSleep(async (done) => {
      if (done.length === 6) emulator.addEvent({ body: '{"late":true}' });
      if (done.length === 8) void source!.close();
    });
    source = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), handler: (webhook) => void runs.push(webhook.id), idle: { minMs: 100, maxMs: 1_000 }, sleep, ...listeners() });
    await source.run();
    // Empty polls double the wait up to the cap; the poll with an event starts again from the floor.
    expect(waits).toEqual([100, 200, 400, 800, 1_000, 1_000, 100, 200]);
    expect(runs).toHaveLength(1);
  });

  it('polls again at once while the relay has more than one batch', async () => {
    for (let n = 0; n < 5; n++) emulator.addEvent({ body: JSON.stringify({ n }) });
    const triggerId = emulator.addTrigger();
    const runs: string[] = [];
    let source: ReturnType<typeof triggerSource> | undefined;
    const { waits, sleep } = recordingSleep(async () => {
      void source!.close();
    });
    source = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), handler: (webhook) => void runs.push(webhook.id), limit: 2, sleep, ...listeners() });
    await source.run();
    expect(runs).toHaveLength(5);
    // Three waits' worth of events (2, 2, 1): only the caught-up one waited.
    expect(waits).toEqual([1_000]);
    expect(emulator.requests.filter((request) => request.path.endsWith('/wait'))).toHaveLength(3);
  });

  it("waits a 429's Retry-After, and backs off with jitter after other failures", async () => {
    const triggerId = emulator.addTrigger();
    const relay = client({ retryBudgetMs: 0 });
    // The OpenAPI description is read (and kept) first, so the failures below all fall on waits.
    await relay.waitTrigger(triggerId);
    emulator.failNext(1, { status: 429, retryAfter: 7 });
    emulator.failNext(3, { status: 500 });
    let source: ReturnType<typeof triggerSource> | undefined;
    const { waits, sleep } = recordingSleep(async (done) => {
      if (done.length === 5) void source!.close();
    });
    const { failures: errors, onError, onEvent } = listeners();
    // No retry budget in the client: every failure reaches the loop at once.
    source = triggerSource({ relay, triggerId, cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), handler: () => {}, errors: { minMs: 1_000, maxMs: 3_000 }, random: () => 0.5, sleep, onError, onEvent });
    await source.run();
    // 429: its Retry-After; then 1 000, 2 000, 3 000 (capped) at three quarters (half fixed, half jitter); then a success, idle.
    expect(waits).toEqual([7_000, 750, 1_500, 2_250, 1_000]);
    expect(errors.map(({ error, context }) => [(error as { code?: string }).code, context.stage, context.retryInMs])).toEqual([
      ['RATE_LIMITED', 'wait', 7_000],
      ['SERVER_ERROR', 'wait', 750],
      ['SERVER_ERROR', 'wait', 1_500],
      ['SERVER_ERROR', 'wait', 2_250],
    ]);
  });

  it('stops the batch at an event whose claim is held elsewhere, and pulls it again once the claim could have ended', async () => {
    const held = emulator.addEvent({ body: '{"n":1}' });
    emulator.addEvent({ body: '{"n":2}' });
    const triggerId = emulator.addTrigger();
    const store = memoryStore();
    // A pushed delivery of the same event, still running: its claim holds for 42 s.
    const pushed = await store.claim(`default:s:${held.id}`, 42_000);
    if (pushed.status !== 'acquired') throw new Error('the claim was not acquired');
    const cursor = memoryCursor();
    const runs: string[] = [];
    let source: ReturnType<typeof triggerSource> | undefined;
    const { waits, sleep } = recordingSleep(async (done) => {
      // The pushed delivery ends during the first wait; the second poll runs the batch.
      if (done.length === 1) await store.release(`default:s:${held.id}`, pushed.token);
      if (done.length === 2) void source!.close();
    });
    const { failures: errors, onError, onEvent } = listeners();
    source = triggerSource({ relay: client(), triggerId, cursor, receiver: createReceiver({ secrets: SECRET, idempotency: { store } }), handler: (webhook) => void runs.push(webhook.id), errors: { minMs: 5, maxMs: 5 }, sleep, onError, onEvent });

    await expect(source.pollOnce()).rejects.toThrow(/being processed elsewhere/);
    expect(cursor.saved).toEqual([]);
    expect(runs).toEqual([]);

    await source.run();
    // The claim's own time, not the error backoff; then the batch, whole, and the idle floor.
    expect(waits).toEqual([42_000, 1_000]);
    expect(errors.map(({ context }) => context)).toEqual([
      { stage: 'event', eventId: held.id },
      { stage: 'event', eventId: held.id, retryInMs: 42_000 },
    ]);
    expect(runs).toHaveLength(2);
    expect(cursor.saved).toHaveLength(1);
  });

  it('close() aborts a wait in flight, and run() ends', async () => {
    let waiting!: () => void;
    const arrived = new Promise<void>((resolve) => {
      waiting = resolve;
    });
    // A relay whose wait never answers.
    const silent = await tinyServer(() => waiting());
    try {
      const relay = relayClient({ baseUrl: silent.url, apiKey: KEY, timeoutMs: 600_000, queryNames: { waitTrigger: { cursor: 'cursor', limit: 'limit', inlineBodies: 'inlineBodies', maxInlineBytes: 'maxInlineBytes' } } });
      const source = triggerSource({ relay, triggerId: crypto.randomUUID(), cursor: memoryCursor(), receiver: createReceiver({ secrets: SECRET }), handler: () => {}, ...listeners() });
      const running = source.run();
      await arrived;
      await source.close({ timeoutMs: 60_000 });
      await running;
      await expect(source.pollOnce()).rejects.toThrow(/closed/);
    } finally {
      await silent.close();
    }
  });

  it('close() resolves within its timeout while a handler is still running; the cursor waits for the batch', async () => {
    emulator.addEvent({ body: '{"slow":true}' });
    const triggerId = emulator.addTrigger();
    let started!: () => void;
    const inHandler = new Promise<void>((resolve) => {
      started = resolve;
    });
    let finish!: () => void;
    const cursor = memoryCursor();
    const source = triggerSource({
      relay: client(),
      triggerId,
      cursor,
      receiver: createReceiver({ secrets: SECRET }),
      handler: () =>
        new Promise<void>((resolve) => {
          finish = resolve;
          started();
        }),
      ...listeners(),
    });
    const running = source.run();
    await inHandler;
    await source.close({ timeoutMs: 50 });
    expect(cursor.saved).toEqual([]);
    // When the handler ends, its batch is whole: the cursor is saved, and the loop ends.
    finish();
    await running;
    expect(cursor.saved).toHaveLength(1);
  });
});

describe('a receiver for pulled events only', () => {
  it('pulls with no secret at all, and refuses a pushed request naming pullOnly', async () => {
    emulator.addEvent({ body: '{"type":"invoice.paid"}', verificationState: 'verified' });
    const triggerId = emulator.addTrigger();
    const receiver = createReceiver({ pullOnly: true });
    const seen: string[] = [];
    const source = triggerSource({ relay: client(), triggerId, cursor: memoryCursor(), receiver, handler: (webhook) => void seen.push(webhook.json<{ type: string }>().type) });
    expect(await source.pollOnce()).toMatchObject({ events: 1, caughtUp: true });
    expect(seen).toEqual(['invoice.paid']);
    await source.close();

    const pushed = new Request('http://127.0.0.1/webhooks', { method: 'POST', body: '{}', headers: { 'webhook-id': 'msg_1', 'webhook-timestamp': '1', 'webhook-signature': 'v1,AAAA' } });
    await expect(receiver.handle(pushed, () => undefined)).rejects.toThrow(/pullOnly: true/);
    await expect(receiver.verifier.verifyRequest(pushed)).rejects.toBeInstanceOf(TypeError);
  });

  it('is a TypeError with secrets or keys beside it, or when it is not a boolean', () => {
    expect(() => createReceiver({ pullOnly: true, secrets: SECRET })).toThrow(/pullOnly: true .* no secrets or keys/);
    // @ts-expect-error -- a string is not a boolean
    expect(() => createReceiver({ pullOnly: 'yes' })).toThrow(/pullOnly must be a boolean/);
    expect(() => createReceiver({})).toThrow(TypeError);
  });
});
