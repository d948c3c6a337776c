/**
 * Reading the three headers as they come on the wire, before any key is tried: one value of
 * `webhook-id` and `webhook-timestamp` (a repeat with another value is refused), the timestamp as
 * canonical Unix seconds, and the `webhook-signature` list split into its `v1` and `v1a` entries
 * within the size limits. Every refusal names the check that failed.
 */

import { rejection } from '../errors.ts';
import { MAX_SIGNATURE_ENTRIES, MAX_SIGNATURE_HEADER_LENGTH } from './limits.ts';

export interface ParsedSignatures {
  v1: string[];
  /** Distinct: each v1a entry costs an Ed25519 check per key, so a repeat is kept once. */
  v1a: string[];
  unknown: number;
  malformed: number;
}

function shown(value: string): string {
  return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
}

export function plural(count: number, one: string, many: string): string {
  return `${count} ${count === 1 ? one : many}`;
}

/** One value of a header that must not repeat with different values. */
export function single(value: string | string[] | undefined, name: string, code: 'MISSING_ID' | 'INVALID_TIMESTAMP'): string | undefined {
  if (typeof value === 'string' || value === undefined) return value;
  if (!Array.isArray(value)) return String(value);
  const distinct = [...new Set(value.map(String))];
  if (distinct.length <= 1) return distinct[0];
  throw rejection(code, `${name} appears ${value.length} times with different values; a message has exactly one`);
}

export function joined(value: string | string[] | undefined): string | undefined {
  if (typeof value === 'string' || value === undefined) return value;
  return Array.isArray(value) ? value.join(' ') : String(value);
}

export function parseTimestamp(text: string): number {
  // The value is read in the pass that checks the digits (Number() would read them again); past
  // 12 digits it is refused below, so it stays exact.
  let seconds = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) {
      throw rejection('INVALID_TIMESTAMP', `webhook-timestamp must be Unix seconds in ASCII digits, got ${shown(text)}`);
    }
    seconds = seconds * 10 + (c - 48);
  }
  if (text.length > 1 && text.charCodeAt(0) === 48) {
    // '01614265330' and '1614265330' are one number but different signed content: accept only the
    // canonical form, so no two header values name the same instant.
    throw rejection('INVALID_TIMESTAMP', `webhook-timestamp ${shown(text)} has a leading zero; Unix seconds are written without one`);
  }
  if (text.length >= 13) {
    throw rejection(
      'INVALID_TIMESTAMP',
      `webhook-timestamp ${shown(text)} has ${text.length} digits: it looks like milliseconds. ` +
        'Standard Webhooks timestamps are Unix seconds (Math.floor(Date.now() / 1000))',
    );
  }
  return seconds;
}

export function parseSignatureHeader(header: string): ParsedSignatures {
  if (header.length > MAX_SIGNATURE_HEADER_LENGTH) {
    throw rejection(
      'INVALID_SIGNATURE_HEADER',
      `webhook-signature is ${header.length} characters long; the limit is ${MAX_SIGNATURE_HEADER_LENGTH}`,
    );
  }
  if (header.length === 0) throw rejection('INVALID_SIGNATURE_HEADER', 'webhook-signature is present but empty');
  // One entry, the usual case outside a rotation, needs no split.
  const entries = header.indexOf(' ') === -1 ? [header] : header.split(' ');
  if (entries.length > MAX_SIGNATURE_ENTRIES) {
    throw rejection(
      'INVALID_SIGNATURE_HEADER',
      `webhook-signature has ${entries.length} entries; the limit is ${MAX_SIGNATURE_ENTRIES}`,
    );
  }
  const parsed: ParsedSignatures = { v1: [], v1a: [], unknown: 0, malformed: 0 };
  for (let i = 0; i < entries.length; i++) {
    let entry = entries[i]!;
    // A repeated webhook-signature header reaches us joined with ', ' (Fetch `Headers.get`, Node's
    // `req.headers`): 'v1,a, v1,b'. The comma before the space is the join, not part of the
    // signature (base64 has no comma), so drop it from an entry that already has its own comma.
    if (i < entries.length - 1 && entry.endsWith(',') && entry.indexOf(',') < entry.length - 1) entry = entry.slice(0, -1);
    if (entry.length === 0) {
      // The list is delimited by single spaces (Standard Webhooks 1.0.0). An empty entry means a
      // header that was altered on the way (doubled or stray spaces): refuse it rather than guess.
      throw rejection(
        'INVALID_SIGNATURE_HEADER',
        'webhook-signature has an empty entry (two spaces in a row, or a leading or trailing space); entries are separated by one space',
      );
    }
    const comma = entry.indexOf(',');
    if (comma <= 0 || comma === entry.length - 1) {
      parsed.malformed++;
      continue;
    }
    // The version is compared in place, without cutting it out.
    if (comma === 2 && entry.startsWith('v1')) parsed.v1.push(entry.slice(3));
    else if (comma === 3 && entry.startsWith('v1a')) {
      const value = entry.slice(4);
      if (!parsed.v1a.includes(value)) parsed.v1a.push(value);
    }
    else parsed.unknown++;
  }
  if (parsed.malformed === entries.length) {
    throw rejection(
      'INVALID_SIGNATURE_HEADER',
      `webhook-signature has no entry of the form 'version,signature' (${plural(entries.length, 'entry', 'entries')} malformed)`,
    );
  }
  return parsed;
}
