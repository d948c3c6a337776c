/** Random ownership tokens: what a store hands the owner of a claim, and checks on every write. */

import { toHex } from './encoding.ts';

// Random bytes for tokens, drawn 4 KiB at a time: one getRandomValues call costs Node about as
// much as a whole verification, and one call here serves 256 tokens. Filled on first use, not at
// load time (Workers refuse random numbers outside a request).
const tokenBytes = new Uint8Array(4096);
let tokenOffset = tokenBytes.length;

/** A fresh 128-bit ownership token, as 32 lower-case hex digits. */
export function newToken(): string {
  if (tokenOffset === tokenBytes.length) {
    globalThis.crypto.getRandomValues(tokenBytes);
    tokenOffset = 0;
  }
  const start = tokenOffset;
  tokenOffset += 16;
  // Read in place, and a string of its own: a slice of a longer string would keep all of it alive
  // for as long as a store keeps the token.
  return toHex(tokenBytes, start, tokenOffset);
}
