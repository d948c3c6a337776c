/**
 * Ordering's pure half: reading a version (numbers, bigints, Dates, ISO 8601 strings
 * with their full fraction and offset), its fixed-width order-preserving encoding, the options'
 * checks, and the entity and version of a verified delivery (scoped by namespace, unsigned
 * deliveries bypassing). The yardsticks are independent: `Date.UTC` and bigint arithmetic.
 */

import { describe, expect, it } from 'vitest';
import { isWebhookError, WebhookError } from '../../src/errors.ts';
import { checkOrderingOptions, encodeVersion, entityKey, MAX_ENTITY_LENGTH, orderingOf, type Ordering } from '../../src/ordering.ts';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { createVerifier, type VerifiedWebhook } from '../../src/verify.ts';
import { seededRandom } from '../chaos/rng.ts';

/** The `INVALID_VERSION` refusal `run` throws, or a failed expectation. */
function refusal(run: () => unknown): WebhookError {
  try {
    run();
  } catch (error) {
    expect(isWebhookError(error)).toBe(true);
    const refused = error as WebhookError;
    expect([refused.code, refused.status]).toEqual(['INVALID_VERSION', 400]);
    return refused;
  }
  throw new Error('expected INVALID_VERSION, nothing was thrown');
}

/** Nanoseconds since 1970 of an ISO string's parts, computed with Date.UTC and bigints. */
function referenceNanos(parts: { y: number; mo: number; d: number; h: number; mi: number; s: number; nanos: number; offsetMinutes: number }): bigint {
  const ms = Date.UTC(parts.y, parts.mo - 1, parts.d, parts.h, parts.mi, parts.s);
  return BigInt(ms) * 1_000_000n + BigInt(parts.nanos) - BigInt(parts.offsetMinutes) * 60_000_000_000n;
}

const pad = (value: number, width: number) => String(value).padStart(width, '0');

describe('encodeVersion: ISO 8601 strings', () => {
  it('keeps the whole fraction: …10.344522Z orders before …10.344523Z, and a nanosecond apart still orders', () => {
    expect(encodeVersion('2026-03-01T10:00:10.344522Z') < encodeVersion('2026-03-01T10:00:10.344523Z')).toBe(true);
    expect(encodeVersion('2026-03-01T10:00:10.344522001Z') > encodeVersion('2026-03-01T10:00:10.344522Z')).toBe(true);
    expect(encodeVersion('2026-03-01T10:00:10Z') < encodeVersion('2026-03-01T10:00:10.000000001Z')).toBe(true);
    expect(encodeVersion('2026-03-01T10:00:09.999999999Z') < encodeVersion('2026-03-01T10:00:10Z')).toBe(true);
  });

  it('reads a fraction of any length up to nanoseconds the same way: .5 = .500 = .500000000', () => {
    const half = encodeVersion('2026-03-01T10:00:10.5Z');
    expect(encodeVersion('2026-03-01T10:00:10.500Z')).toBe(half);
    expect(encodeVersion('2026-03-01T10:00:10.500000000Z')).toBe(half);
    expect(encodeVersion('2026-03-01T10:00:10,5Z')).toBe(half);
    // Digits past the ninth are taken when they are zeros (they change nothing).
    expect(encodeVersion('2026-03-01T10:00:10.500000000000Z')).toBe(half);
  });

  it.each([
    ['+02:00', '2026-03-01T12:00:00+02:00'],
    ['+0200', '2026-03-01T12:00:00+0200'],
    ['+02', '2026-03-01T12:00:00+02'],
    ['-05:30', '2026-03-01T04:30:00-05:30'],
    ['-00:00', '2026-03-01T10:00:00-00:00'],
    ['z', '2026-03-01T10:00:00z'],
    ['a lower-case t', '2026-03-01t10:00:00Z'],
    ['a space (RFC 3339)', '2026-03-01 10:00:00Z'],
    ['an offset that crosses the day', '2026-02-28T23:00:00-11:00'],
  ])('applies the offset (%s): %s is 2026-03-01T10:00:00Z', (_label, text) => {
    expect(encodeVersion(text)).toBe(encodeVersion('2026-03-01T10:00:00Z'));
  });

  it('orders by the instant, not the text: 11:00+02:00 is before 10:00Z', () => {
    expect(encodeVersion('2026-03-01T11:00:00+02:00') < encodeVersion('2026-03-01T10:00:00Z')).toBe(true);
  });

  it('agrees with Date on every millisecond instant, and the string and the Date encode alike', () => {
    const random = seededRandom(26);
    const dates = Array.from({ length: 500 }, () => new Date(Math.floor(random() * 2 ** 42) - 2 ** 40));
    for (const date of dates) expect(encodeVersion(date.toISOString())).toBe(encodeVersion(date));
    const sorted = [...dates].sort((a, b) => a.getTime() - b.getTime());
    const encoded = sorted.map((date) => encodeVersion(date.toISOString()));
    for (let i = 1; i < encoded.length; i++) {
      expect(encoded[i - 1]! <= encoded[i]!).toBe(true);
      expect(encoded[i - 1] === encoded[i]).toBe(sorted[i - 1]!.getTime() === sorted[i]!.getTime());
    }
  });

  it('orders random nanosecond instants with random offsets exactly as their bigint nanoseconds do', () => {
    const random = seededRandom(2026);
    const int = (below: number) => Math.floor(random() * below);
    const cases = Array.from({ length: 1000 }, () => {
      const parts = { y: 1900 + int(300), mo: 1 + int(12), d: 1 + int(28), h: int(24), mi: int(60), s: int(60), nanos: int(4) === 0 ? 0 : int(1e9), offsetMinutes: (int(2) ? 1 : -1) * int(24 * 60) };
      // Nearby instants too, so the fraction decides the order.
      if (int(3) === 0) Object.assign(parts, { y: 2026, mo: 3, d: 1, h: 10, mi: 0, s: 10, offsetMinutes: 0 });
      const offset = parts.offsetMinutes === 0 && int(2) === 0 ? 'Z' : `${parts.offsetMinutes < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(parts.offsetMinutes) / 60), 2)}:${pad(Math.abs(parts.offsetMinutes) % 60, 2)}`;
      const fraction = parts.nanos === 0 && int(2) === 0 ? '' : `.${pad(parts.nanos, 9).replace(/0+$/, '') || '0'}`;
      const text = `${pad(parts.y, 4)}-${pad(parts.mo, 2)}-${pad(parts.d, 2)}T${pad(parts.h, 2)}:${pad(parts.mi, 2)}:${pad(parts.s, 2)}${fraction}${offset}`;
      return { text, nanos: referenceNanos(parts) };
    });
    for (let i = 1; i < cases.length; i++) {
      const [a, b] = [cases[i - 1]!, cases[i]!];
      const expected = a.nanos < b.nanos ? -1 : a.nanos > b.nanos ? 1 : 0;
      const [ea, eb] = [encodeVersion(a.text), encodeVersion(b.text)];
      expect([a.text, b.text, ea < eb ? -1 : ea > eb ? 1 : 0]).toEqual([a.text, b.text, expected]);
    }
  });

  it('knows leap years and counts a leap second as the next minute', () => {
    expect(encodeVersion('2024-02-29T00:00:00Z')).toBe(encodeVersion(new Date(Date.UTC(2024, 1, 29))));
    expect(encodeVersion('2000-02-29T00:00:00Z')).toBe(encodeVersion(new Date(Date.UTC(2000, 1, 29))));
    expect(encodeVersion('2016-12-31T23:59:60Z')).toBe(encodeVersion('2017-01-01T00:00:00Z'));
    expect(encodeVersion('2016-12-31T23:59:59.999Z') < encodeVersion('2016-12-31T23:59:60Z')).toBe(true);
  });

  it('spans year 0000 to the last Date, six-digit years included', () => {
    expect(encodeVersion('0000-01-01T00:00:00Z')).toBe(`t${'0'.repeat(22)}`);
    expect(encodeVersion('+275760-09-13T00:00:00Z')).toBe(encodeVersion(new Date(8.64e15)));
    expect(encodeVersion('+002026-03-01T10:00:00Z')).toBe(encodeVersion('2026-03-01T10:00:00Z'));
    expect(encodeVersion('1969-12-31T23:59:59.999999999Z') < encodeVersion('1970-01-01T00:00:00Z')).toBe(true);
  });

  it.each([
    ['an empty string', ''],
    ['a date alone (local midnight somewhere)', '2025-07-01'],
    ['no offset (local time somewhere)', '2026-03-01T10:00:00'],
    ['no seconds', '2026-03-01T10:00Z'],
    ['a number in a string', '1614265330'],
    ['the basic format', '20260301T100000Z'],
    ['month 13', '2026-13-01T10:00:00Z'],
    ['day 0', '2026-03-00T10:00:00Z'],
    ['February 29 of a common year', '2023-02-29T00:00:00Z'],
    ['February 29 of 1900', '1900-02-29T00:00:00Z'],
    ['April 31', '2026-04-31T00:00:00Z'],
    ['hour 24', '2026-03-01T24:00:00Z'],
    ['minute 60', '2026-03-01T10:60:00Z'],
    ['second 61', '2026-03-01T10:00:61Z'],
    ['offset hour 24', '2026-03-01T10:00:00+24:00'],
    ['offset minute 60', '2026-03-01T10:00:00+01:60'],
    ['an empty fraction', '2026-03-01T10:00:00.Z'],
    ['a year -000000', '-000000-01-01T00:00:00Z'],
    ['a year before 0000', '-000001-01-01T00:00:00Z'],
    ['an instant before 0000 once the offset is applied', '0000-01-01T00:00:00+01:00'],
    ['a fraction finer than a nanosecond', '2026-03-01T10:00:10.3445220001Z'],
    ['trailing text', '2026-03-01T10:00:00Z '],
    ['leading text', ' 2026-03-01T10:00:00Z'],
    ['full-width digits', '２０２６-03-01T10:00:00Z'],
    ['Date.toString text', new Date(0).toString()],
  ])('refuses %s with INVALID_VERSION', (_label, text) => {
    const error = refusal(() => encodeVersion(text));
    // The sender's text is not echoed back.
    if (text.length > 0) expect(error.message).not.toContain(text);
  });
});

describe('encodeVersion: numbers, bigints and Dates', () => {
  it('encodes integers in 41 characters and times in 23, whatever the value', () => {
    for (const value of [0, 1, 42, Number.MAX_SAFE_INTEGER, 0n, 2n ** 64n, 10n ** 40n - 1n]) expect(encodeVersion(value)).toHaveLength(41);
    for (const value of [new Date(0), new Date(-62_167_219_200_000), new Date(8.64e15), '2026-03-01T10:00:10.344522Z']) expect(encodeVersion(value)).toHaveLength(23);
  });

  it('orders bigints past 2^53 exactly (where a double would not)', () => {
    const base = 2n ** 53n;
    expect(Number(base + 1n)).toBe(Number(base));
    expect(encodeVersion(base + 1n) > encodeVersion(base)).toBe(true);
    expect(encodeVersion(2n ** 64n) > encodeVersion(2n ** 64n - 1n)).toBe(true);
    expect(encodeVersion(10n ** 40n - 1n) > encodeVersion(10n ** 40n - 2n)).toBe(true);
  });

  it('orders random integers (numbers and bigints mixed) as their values do', () => {
    const random = seededRandom(53);
    const values: (number | bigint)[] = Array.from({ length: 600 }, (_, i) => {
      if (i % 3 === 0) return Math.floor(random() * Number.MAX_SAFE_INTEGER);
      const digits = 1 + Math.floor(random() * 40);
      return BigInt(Array.from({ length: digits }, () => Math.floor(random() * 10)).join(''));
    });
    const sorted = [...values].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0));
    const encoded = sorted.map((value) => encodeVersion(value));
    expect([...encoded].sort()).toEqual(encoded);
  });

  it('a number and the bigint of the same value are one version; -0 is 0', () => {
    expect(encodeVersion(7)).toBe(encodeVersion(7n));
    expect(encodeVersion(Number.MAX_SAFE_INTEGER)).toBe(encodeVersion(BigInt(Number.MAX_SAFE_INTEGER)));
    expect(encodeVersion(-0)).toBe(encodeVersion(0));
  });

  it('Dates order with their milliseconds, before 1970 too', () => {
    expect(encodeVersion(new Date(-1)) < encodeVersion(new Date(0))).toBe(true);
    expect(encodeVersion(new Date(1)) > encodeVersion(new Date(0))).toBe(true);
    expect(encodeVersion(new Date(-62_167_219_200_000))).toBe(`t${'0'.repeat(22)}`);
  });

  it('every integer orders before every time (mixing kinds: the times win)', () => {
    expect(encodeVersion(10n ** 40n - 1n) < encodeVersion('0000-01-01T00:00:00Z')).toBe(true);
  });

  it.each<[string, unknown]>([
    ['NaN', Number.NaN],
    ['a negative number', -1],
    ['-Infinity', -Infinity],
    ['Infinity', Infinity],
    ['a fraction', 1.5],
    ['a number past 2^53', 2 ** 53],
    ['a negative bigint', -1n],
    ['a bigint of 41 digits', 10n ** 40n],
    ['an invalid Date', new Date(Number.NaN)],
    ['a Date before year 0', new Date(-62_167_219_200_001)],
    ['null', null],
    ['undefined', undefined],
    ['an object', { version: 3 }],
    ['an array', [1]],
    ['a boolean', true],
    ['a symbol', Symbol('v')],
    ['a function', () => 1],
  ])('refuses %s with INVALID_VERSION', (_label, value) => {
    refusal(() => encodeVersion(value));
  });

  it('says why in the message, and carries no stack frames (a request failed, not the code)', () => {
    expect(refusal(() => encodeVersion(2 ** 53)).message).toMatch(/bigint/);
    expect(refusal(() => encodeVersion(1.5)).message).toMatch(/fraction/);
    expect(refusal(() => encodeVersion('2026-03-01T10:00:00')).message).toMatch(/offset/);
    expect(refusal(() => encodeVersion(-1)).stack).toBe(`WebhookError: ${refusal(() => encodeVersion(-1)).message}`);
  });
});

describe('checkOrderingOptions', () => {
  it('is undefined without ordering, and exclusive by default', () => {
    expect(checkOrderingOptions(undefined)).toBeUndefined();
    const key = () => 'a';
    const version = () => 1;
    expect(checkOrderingOptions({ key, version })).toEqual({ key, version, exclusive: true });
    expect(checkOrderingOptions({ key, version, exclusive: false })).toEqual({ key, version, exclusive: false });
  });

  it.each<[string, unknown, RegExp]>([
    ['null', null, /options object/],
    ['a function', () => 1, /options object/],
    ['no key', { version: () => 1 }, /ordering\.key must be a function/],
    ['a key that is a string', { key: 'data.id', version: () => 1 }, /ordering\.key must be a function/],
    ['no version', { key: () => 'a' }, /ordering\.version must be a function/],
    ['exclusive as a string', { key: () => 'a', version: () => 1, exclusive: 'yes' }, /exclusive must be a boolean/],
  ])('throws a TypeError for %s', (_label, options, message) => {
    expect(() => checkOrderingOptions(options)).toThrow(TypeError);
    expect(() => checkOrderingOptions(options)).toThrow(message);
  });
});

describe('orderingOf: the entity and version of a verified delivery', () => {
  const secret = generateSecret();
  const verifier = createVerifier({ secrets: secret, unsigned: 'accept' });

  async function verified(body: string, { signed = true } = {}): Promise<VerifiedWebhook> {
    if (!signed) {
      return verifier.verify({ headers: { 'webhook-id': 'msg_u', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) }, body });
    }
    const delivery = await signWebhook({ secret, body, id: 'msg_1' });
    return verifier.verify({ headers: delivery.headers, body });
  }

  const standard = checkOrderingOptions({ key: (event: { data: { id: unknown } }) => event.data.id, version: (event: { timestamp: unknown }) => event.timestamp }) as Ordering;
  const event = (id: unknown, timestamp: unknown, type = 'subscription.updated') => JSON.stringify({ type, timestamp, data: { id } });

  it('scopes the entity by namespace (class o) and encodes the version', async () => {
    const webhook = await verified(event('sub_1', '2026-03-01T10:00:10.344522Z'));
    expect(orderingOf(standard, webhook, 'default')).toEqual({ entity: 'default:o:sub_1', version: encodeVersion('2026-03-01T10:00:10.344522Z') });
    expect(orderingOf(standard, webhook, 't.acme')!.entity).toBe('t.acme:o:sub_1');
    expect(entityKey('t.acme', 'sub_1')).toBe('t.acme:o:sub_1');
  });

  it('is undefined without ordering, and for an event whose key is undefined (not ordered)', async () => {
    const webhook = await verified(event(undefined, 'not even a time'));
    expect(orderingOf(undefined, webhook, 'default')).toBeUndefined();
    expect(orderingOf(standard, webhook, 'default')).toBeUndefined();
  });

  it('an unsigned delivery bypasses ordering, however huge its version', async () => {
    const counter = checkOrderingOptions({ key: (e: { data: { id: unknown } }) => e.data.id, version: (e: { data: { v: unknown } }) => BigInt(e.data.v as string) })!;
    const body = JSON.stringify({ type: 't', timestamp: '9999-12-31T23:59:59Z', data: { id: 'sub_1', v: '9'.repeat(39) } });
    expect(orderingOf(standard, await verified(body, { signed: false }), 'default')).toBeUndefined();
    expect(orderingOf(counter, await verified(body, { signed: false }), 'default')).toBeUndefined();
    // Signed, the same body is ordered.
    expect(orderingOf(counter, await verified(body), 'default')!.version).toBe(`i0${'9'.repeat(39)}`);
  });

  it('numbers and bigints name an entity as their decimal text', async () => {
    expect(orderingOf(standard, await verified(event(42, '2026-03-01T10:00:00Z')), 'n')!.entity).toBe('n:o:42');
    const big = checkOrderingOptions({ key: () => 2n ** 70n, version: () => 1 })!;
    expect(orderingOf(big, await verified('{}'), 'n')!.entity).toBe(`n:o:${2n ** 70n}`);
  });

  it('the event type can be part of the key, so one entity\'s types are ordered apart', async () => {
    const byType = checkOrderingOptions({ key: (e: { type: string; data: { id: string } }) => `${e.type}/${e.data.id}`, version: (e: { timestamp: string }) => e.timestamp })!;
    const webhook = await verified(event('sub_1', '2026-03-01T10:00:00Z', 'invoice.paid'));
    expect(orderingOf(byType, webhook, 'default')!.entity).toBe('default:o:invoice.paid/sub_1');
  });

  it.each<[string, string, RegExp]>([
    ['a key of null', event(null, '2026-03-01T10:00:00Z'), /null/],
    ['a key that is an object', event({ id: 1 }, '2026-03-01T10:00:00Z'), /object/],
    ['an empty key', event('', '2026-03-01T10:00:00Z'), /empty/],
    ['a key that is too long', event('x'.repeat(MAX_ENTITY_LENGTH + 1), '2026-03-01T10:00:00Z'), new RegExp(String(MAX_ENTITY_LENGTH))],
    ['a missing version', JSON.stringify({ type: 't', data: { id: 'sub_1' } }), /no version/],
    ['a malformed version', event('sub_1', 'yesterday'), /ISO 8601/],
    ['a negative version', event('sub_1', -3), /negative/],
  ])('%s is INVALID_VERSION', async (_label, body, message) => {
    const webhook = await verified(body);
    expect(refusal(() => orderingOf(standard, webhook, 'default')).message).toMatch(message);
  });

  it('a key of exactly the longest length is taken', async () => {
    const webhook = await verified(event('x'.repeat(MAX_ENTITY_LENGTH), '2026-03-01T10:00:00Z'));
    expect(orderingOf(standard, webhook, 'd')!.entity).toHaveLength(MAX_ENTITY_LENGTH + 4);
  });

  it('key or version throwing is INVALID_VERSION, the thrown error as cause', async () => {
    const webhook = await verified(JSON.stringify({ type: 't', timestamp: 'x' }));
    // `event.data.id` on a payload without `data` throws a TypeError.
    const fromKey = refusal(() => orderingOf(standard, webhook, 'default'));
    expect(fromKey.message).toMatch(/ordering\.key threw/);
    expect(fromKey.cause).toBeInstanceOf(TypeError);
    const boom = new Error('boom');
    const throwing = checkOrderingOptions({ key: () => 'a', version: () => { throw boom; } })!;
    const fromVersion = refusal(() => orderingOf(throwing, webhook, 'default'));
    expect(fromVersion.message).toMatch(/ordering\.version threw/);
    expect(fromVersion.cause).toBe(boom);
  });

  it('a body that is not JSON is INVALID_PAYLOAD with the SyntaxError as cause', async () => {
    const webhook = await verified('not json');
    try {
      orderingOf(standard, webhook, 'default');
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ code: 'INVALID_PAYLOAD', status: 400 });
      expect((error as WebhookError).cause).toBeInstanceOf(SyntaxError);
    }
  });
});
