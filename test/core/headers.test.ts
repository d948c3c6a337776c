/**
 * claimedWebhookId: the id a request claimed, read the way the verifier reads it, for reports
 * about requests that may have been refused (so it never throws).
 */

import { describe, expect, it } from 'vitest';
import { claimedWebhookId, type HeadersInput } from '../../src/headers.ts';

describe('claimedWebhookId', () => {
  it.each<[string, HeadersInput, string | undefined]>([
    ['Node headers', { 'webhook-id': 'msg_1', 'webhook-timestamp': '1' }, 'msg_1'],
    ['a repeated header, first value', { 'webhook-id': ['msg_1', 'msg_2'] }, 'msg_1'],
    ['any spelling', { 'Webhook-Id': 'msg_1' }, 'msg_1'],
    ['two spellings, the first found', { 'webhook-id': 'msg_1', 'WEBHOOK-ID': 'msg_2' }, 'msg_1'],
    ['svix-id without webhook-id', { 'svix-id': 'msg_3' }, 'msg_3'],
    ['webhook-id before svix-id', { 'svix-id': 'msg_3', 'webhook-id': 'msg_1' }, 'msg_1'],
    ['a Fetch Headers', new Headers({ 'svix-id': 'msg_4' }), 'msg_4'],
    ['a Fetch Headers with both', new Headers({ 'svix-id': 'msg_4', 'webhook-id': 'msg_5' }), 'msg_5'],
    ['pairs', [['Webhook-Id', 'msg_6'], ['webhook-id', 'msg_7']], 'msg_6'],
    ['a Map', new Map([['svix-id', 'msg_8']]), 'msg_8'],
    ['no id', { 'webhook-timestamp': '1' }, undefined],
    ['an empty id, as sent', { 'webhook-id': '' }, ''],
    ['an empty list', { 'webhook-id': [] }, undefined],
  ])('%s', (_label, headers, expected) => {
    expect(claimedWebhookId(headers)).toBe(expected);
  });

  it('a value the verifier would read as text is text', () => {
    expect(claimedWebhookId({ 'webhook-id': 42 } as unknown as HeadersInput)).toBe('42');
  });

  it('claims nothing, and does not throw, for headers that cannot be read', () => {
    const throwing = {
      get 'webhook-id'(): string {
        throw new Error('unreadable');
      },
    };
    expect(claimedWebhookId(throwing as unknown as HeadersInput)).toBeUndefined();
    expect(claimedWebhookId(null as unknown as HeadersInput)).toBeUndefined();
    expect(claimedWebhookId(undefined as unknown as HeadersInput)).toBeUndefined();
  });
});
