/**
 * What the relay tests share: one distinctive API key, a record of every text a test could show a
 * person (error messages, stacks, `util.inspect`, `JSON.stringify`, CLI output), and the check
 * that the key is in none of it.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { inspect } from 'node:util';
import { expect } from 'vitest';
import { RelayError } from '../../src/relay/index.ts';

/** The key every relay test uses: long and odd enough that a match is never a coincidence. */
export const KEY = 'whk_Zq7DISTINCTIVEkey_r3lay_9f8e7d6c5b4a';
/** Another valid-looking key a lying server may echo. */
export const OTHER_KEY = 'whk_OTHERkey_5d4c3b2a1908';

const shown: string[] = [];

/** Records `text` as something a person could see. */
export function record(text: string): void {
  shown.push(text);
}

/** Records every way `value` can be shown, and returns it. */
export function recordAll<T>(value: T): T {
  shown.push(inspect(value, { depth: 10 }));
  try {
    shown.push(JSON.stringify(value) ?? '');
  } catch {
    // A value JSON cannot hold (a cycle) is covered by inspect.
  }
  if (value instanceof Error) {
    shown.push(value.message, value.stack ?? '', String(value), inspect(value.cause, { depth: 10 }));
  }
  return value;
}

/** Asserts that `promise` rejects with a RelayError, records it, and returns it. */
export async function relayFailure(promise: Promise<unknown>): Promise<RelayError> {
  const error: unknown = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(RelayError);
  return recordAll(error as RelayError);
}

/** Asserts that `action` throws a TypeError (or RangeError) at once, records it, and returns it. */
export function thrown(action: () => unknown): Error {
  let error: unknown;
  try {
    action();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(Error);
  return recordAll(error as Error);
}

/** Asserts that neither key appears in anything recorded so far. */
export function expectNoKeyShown(): void {
  const all = shown.join('\n');
  expect(all.length).toBeGreaterThan(0);
  expect(all).not.toContain(KEY);
  expect(all).not.toContain(KEY.slice(4));
  expect(all).not.toContain(OTHER_KEY);
}

/** A server on 127.0.0.1 whose every answer `handler` writes: for lies and echoes the emulator will not tell. */
export async function tinyServer(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; server: Server; close: () => Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
