/** The bench's fixtures: the key its floors use, and the hand-written checks it times. */

import { createHmac, KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { handWrittenGithubVerify, handWrittenVerify, jsonBody, newSecret, signedMessage } from '../../bench/fixtures.ts';

describe('the floors are keyed as the package keys', () => {
  it('newSecret() gives the HMAC key as a secret KeyObject, and the raw bytes apart', () => {
    const { secret, key, bytes } = newSecret();
    // A Buffer key is about four times slower on Node 24: a floor keyed so is no floor there.
    expect(key).toBeInstanceOf(KeyObject);
    expect(key.type).toBe('secret');
    expect(Buffer.from(key.export()).equals(bytes)).toBe(true);
    expect(secret).toBe(`whsec_${bytes.toString('base64')}`);
  });

  it('the hand-written check accepts a valid request keyed either way, and refuses a forged one', () => {
    const { key, bytes } = newSecret();
    const message = signedMessage(key, jsonBody(1024));
    expect(handWrittenVerify(message.headers, message.body, key)).toBe(true);
    expect(handWrittenVerify(message.headers, message.body, bytes)).toBe(true);
    expect(handWrittenVerify({ ...message.headers, 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` }, message.body, key)).toBe(false);
  });
});

describe('the hand-written check of GitHub scheme', () => {
  const { key, bytes } = newSecret();
  const body = jsonBody(1024);
  const signature = `sha256=${createHmac('sha256', bytes).update(body).digest('hex')}`;

  it('accepts the hex HMAC of the body alone', () => {
    expect(handWrittenGithubVerify({ 'x-hub-signature-256': signature }, body, key)).toBe(true);
  });

  it('refuses another HMAC, another body, a missing or malformed header', () => {
    expect(handWrittenGithubVerify({ 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` }, body, key)).toBe(false);
    expect(handWrittenGithubVerify({ 'x-hub-signature-256': signature }, jsonBody(1025), key)).toBe(false);
    expect(handWrittenGithubVerify({}, body, key)).toBe(false);
    expect(handWrittenGithubVerify({ 'x-hub-signature-256': signature.slice('sha256='.length) }, body, key)).toBe(false);
    expect(handWrittenGithubVerify({ 'x-hub-signature-256': 'sha256=abc' }, body, key)).toBe(false);
  });
});
