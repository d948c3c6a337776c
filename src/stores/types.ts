/**
 * Where claims on `webhook-id` live. A store is a small interface around a client the user
 * supplies; every operation is one atomic check-and-set.
 */

/**
 * The answer to a claim: `acquired` (run the handler, then `complete` or `release` with the
 * token), `processing` (another delivery of this id holds the claim now) or `completed`.
 *
 * @example
 * ```ts
 * const result: ClaimResult = await store.claim('default:msg_1', 60_000);
 * if (result.status === 'acquired') await store.complete('default:msg_1', result.token, 86_400_000);
 * ```
 */
export type ClaimResult =
  | { status: 'acquired'; token: string }
  | { status: 'processing'; /** How long the current claim still holds, when the store knows. */ retryAfterMs?: number }
  | { status: 'completed' };

/**
 * An idempotency store: atomic claims keyed by namespace and `webhook-id`.
 *
 * Rules every implementation keeps:
 * - `claim` atomically takes a free or expired key for `lockMs`, with a fresh ownership token;
 * - `complete` marks the key done for `ttlMs`, and `release` frees it, only while `token` still
 *   owns the claim (a handler whose lock expired and was taken over returns `false` and changes
 *   nothing);
 * - an unreachable backend rejects (the receiver turns that into `STORE_UNAVAILABLE`).
 *
 * @example
 * ```ts
 * import { createReceiver, memoryStore } from 'webhook-receiver';
 * const receiver = createReceiver({ secrets, idempotency: { store: memoryStore({ max: 10_000 }) } });
 * ```
 */
export interface IdempotencyStore {
  claim(key: string, lockMs: number): Promise<ClaimResult>;
  /** `false`: the token no longer owns the key. */
  complete(key: string, token: string, ttlMs: number): Promise<boolean>;
  /** `false`: the token no longer owns the key. */
  release(key: string, token: string): Promise<boolean>;
}

const TOKEN_CHARS = '0123456789abcdef';

/** A fresh 128-bit ownership token, as hex. */
export function newToken(): string {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16));
  let token = '';
  for (const byte of bytes) token += TOKEN_CHARS[byte >> 4]! + TOKEN_CHARS[byte & 15]!;
  return token;
}
