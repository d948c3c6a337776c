/**
 * The two base64 decoders share one loop: the strict one (signatures) refuses wrong padding and
 * non-zero unused bits, the lenient one (secrets, as the reference libraries read them) takes both.
 * Node's Buffer is the yardstick for the bytes.
 */

import { describe, expect, it } from 'vitest';
import { sha256, signedContent } from '../../src/crypto.ts';
import { base64Decode, base64DecodeLenient, base64Encode, toHex } from '../../src/lib/encoding.ts';

const bytesOf = (text: string) => Uint8Array.from(Buffer.from(text, 'base64'));

describe('base64Decode and base64DecodeLenient', () => {
  it.each(['', 'AA==', 'AAA=', 'AAAA', 'AA', 'AAA', '+/+/', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaQ='])('both decode the canonical %j as Buffer does', (text) => {
    expect(base64Decode(text)).toEqual(bytesOf(text));
    expect(base64DecodeLenient(text)).toEqual(bytesOf(text));
  });

  it.each([
    ['non-zero unused bits', 'AB=='],
    ['non-zero unused bits, unpadded', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS'],
    ['padding on a length that is not a multiple of four', 'AAAAAA='],
    ['one padding character short', 'AA='],
  ])('only the lenient one takes %s (%j)', (_label, text) => {
    expect(base64Decode(text)).toBeUndefined();
    expect(base64DecodeLenient(text)).toEqual(bytesOf(text));
  });

  it.each([
    ['a character outside the alphabet', 'AA-A'],
    ['whitespace', 'AA AA'],
    ['a lone character', 'A'],
    ['five characters', 'AAAAA'],
    ['three padding characters', 'A==='],
    ['padding in the middle', 'AA==AAAA'],
    ['a non-ASCII character', 'AAA\u00e9'],
  ])('both refuse %s (%j)', (_label, text) => {
    expect(base64Decode(text)).toBeUndefined();
    expect(base64DecodeLenient(text)).toBeUndefined();
  });
});

describe('signedContent', () => {
  it.each([
    ['an ASCII prefix', 'msg_1.1614265330.'],
    ['a prefix that is not ASCII', 'msg_\u00e9\u4e2d\ud83d\ude00.1614265330.'],
    ['a lone surrogate, written as U+FFFD', 'msg_\ud800.1614265330.'],
  ])('joins %s and the body as UTF-8 bytes', (_label, prefix) => {
    const body = Uint8Array.from([0x7b, 0x00, 0xff, 0x7d]);
    const content = signedContent(prefix, body);
    expect(Buffer.from(content)).toEqual(Buffer.concat([Buffer.from(prefix, 'utf8'), body]));
  });
});

describe('base64Encode', () => {
  // Long inputs take the native encoder (toBase64 on Node 26, node:buffer on 22 and 24, registered
  // by the crypto module), short ones the portable loop: both must write the same text.
  it('agrees with node:buffer at every length around the switch, views with an offset included', () => {
    const pool = new Uint8Array(1200);
    for (let i = 0; i < pool.length; i++) pool[i] = (i * 151 + 7) & 0xff;
    for (let length = 0; length <= 300; length++) {
      for (const offset of [0, 1, 5]) {
        const view = pool.subarray(offset, offset + length);
        expect(base64Encode(view)).toBe(Buffer.from(view).toString('base64'));
      }
    }
    const large = pool.subarray(3, 1199);
    expect(base64Decode(base64Encode(large))).toEqual(large);
  });
});

describe('toHex', () => {
  // A whole array takes the native toHex where the runtime has it (Node 26), a range the loop: both
  // must write what node:buffer writes.
  it('agrees with node:buffer for whole arrays, views with an offset, and ranges', () => {
    const pool = new Uint8Array(300);
    for (let i = 0; i < pool.length; i++) pool[i] = (i * 151 + 7) & 0xff;
    for (let length = 0; length <= 40; length++) {
      for (const offset of [0, 1, 5]) {
        const view = pool.subarray(offset, offset + length);
        expect(toHex(view)).toBe(Buffer.from(view).toString('hex'));
        expect(toHex(pool, offset, offset + length)).toBe(Buffer.from(view).toString('hex'));
      }
    }
    expect(toHex(Uint8Array.of(0, 9, 10, 255))).toBe('00090aff');
  });
});

describe('sha256', () => {
  it('gives the standard digest (FIPS 180-2 "abc")', async () => {
    const digest = await sha256(new TextEncoder().encode('abc'));
    expect(Buffer.from(digest).toString('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
