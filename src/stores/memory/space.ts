/** One key class's entries of the memory store (signed or unsigned ids): live claims and completions, bounded. */

import { HEX_PAIRS } from '../../lib/encoding.ts';
import { newToken } from '../../lib/token.ts';

/**
 * A claim (its owner's token, until when its lock holds) or, once `done`, a completion (its token,
 * until when it is remembered). One record for both, in one map: completing a claim flips `done`
 * in place, so a completion costs no map operation and allocates nothing.
 *
 * A completion keeps its token as two parts (see {@link Tokens}), not as a string: a string per id,
 * kept for the whole `ttlSeconds`, was the largest object a remembered id held, and the garbage
 * collector's work grows with the objects a full store keeps. A claim also keeps the token's text
 * until it settles: its owner hands back that very string, so its completion is recognised
 * without reading the token (the parts are the check for any other string).
 */
export interface Entry {
  /** The id's key, so the order of completions can find a completion in the map. */
  key: string;
  /** The token's first 24 hex digits, shared by every token of its series. */
  prefix: string;
  /** The token's serial in its series (its last 8 hex digits). */
  serial: number;
  until: number;
  /** The token's text while the claim is held, `undefined` once it is a completion. */
  token: string | undefined;
  /**
   * A completion still remembered (the id is done), else a claim. Set false again when a
   * completion is forgotten: the order of completions then skips it without a look-up.
   */
  done: boolean;
}

/** Serials per series: below 2^30, so a serial is always a small integer V8 keeps in the record itself. */
const SERIALS = 2 ** 30;
/** Hex digits of the random prefix: 96 bits, the serial's 8 digits making the 128-bit token. */
const PREFIX_DIGITS = 24;
const TOKEN_DIGITS = PREFIX_DIGITS + 8;
/** Hex digits a token shares with the 255 tokens issued around it (all but its last two). */
const HEAD_DIGITS = TOKEN_DIGITS - 2;

/**
 * The memory store's ownership tokens: 128 bits in 32 lower-case hex digits, like every store's,
 * made of a random 96-bit prefix and a serial. A series of 2^30 tokens shares one prefix; the
 * next series draws a new one. Within one store no two claims get the same token (the serial
 * never repeats under a prefix, and a prefix repeats with odds of 2^-96), which is all fencing
 * needs: tokens never leave the process.
 */
export class Tokens {
  /** The last token's prefix. */
  prefix = '';
  /** The last token's serial: starts at the end of a series, so the first token draws a prefix. */
  serial = SERIALS - 1;
  /** The last token's text. */
  last = '';
  /**
   * The first 30 digits of the tokens of serials `#headOf * 256` to `#headOf * 256 + 255`: the
   * prefix and the serial's upper six, so a token is one join of two strings that already exist.
   */
  #head = '';
  /** The serial's upper part `#head` was made for; -1 when a new prefix made it stale. */
  #headOf = -1;

  /** A fresh token: {@link last}, its parts {@link prefix} and {@link serial}, until the next one. */
  issue(): string {
    if (this.serial === SERIALS - 1) {
      this.prefix = newToken().slice(0, PREFIX_DIGITS);
      this.serial = 0;
      this.#headOf = -1;
    } else {
      this.serial++;
    }
    const high = this.serial >>> 8;
    if (high !== this.#headOf) {
      this.#head = this.prefix + high.toString(16).padStart(HEAD_DIGITS - PREFIX_DIGITS, '0');
      this.#headOf = high;
    }
    this.last = this.#head + HEX_PAIRS[this.serial & 255]!;
    return this.last;
  }
}

/**
 * Whether `token` is the one `entry` was given: the very text a live claim keeps, else its prefix,
 * then its serial's four bytes in hex, read in place (no string is built to compare).
 */
export function owns(entry: Entry, token: string): boolean {
  if (entry.token === token) return true;
  if (token.length !== TOKEN_DIGITS || !token.startsWith(entry.prefix)) return false;
  const { serial } = entry;
  for (let shift = 24, at = PREFIX_DIGITS; shift >= 0; shift -= 8, at += 2) {
    if (!token.startsWith(HEX_PAIRS[(serial >>> shift) & 255]!, at)) return false;
  }
  return true;
}

/**
 * One key class's entries: claims and completed ids in one map (one look-up answers a claim
 * whatever the id's state; the previous two maps cost a claim two look-ups and a completion a
 * delete and an insert). Completions are also queued in the order they were recorded:
 * completions of one endpoint share one TTL, so the first completion is the first to expire, and
 * finding room is a look at the front of the queue rather than a scan.
 *
 * The queue is an array with a moving head, not the map's own order: a `Map` keeps the slots of
 * deleted entries until it is rehashed, so reading the first entry of a map used as a queue skips
 * every entry deleted from its front since, which made each claim of a full store cost a pass
 * over tens of thousands of holes.
 */
export class Space {
  readonly entries = new Map<string, Entry>();
  /** How many entries are claims (the rest are completions). */
  claims = 0;
  #order: Entry[] = [];
  #head = 0;
  /**
   * A time before which no claim's lock runs out (a lower bound on the earliest `until`): while
   * the clock is below it, a full store of live claims is known without a scan, so a store that
   * is full under load does not pay a pass over every entry per request.
   */
  #claimsLiveUntil = 0;
  constructor(readonly max: number) {}

  /** How many entries are completions. */
  get completed(): number {
    return this.entries.size - this.claims;
  }

  /** The key's live claim, when `token` holds it. */
  held(key: string, token: string, time: number): Entry | undefined {
    const entry = this.entries.get(key);
    return entry !== undefined && !entry.done && entry.until > time && owns(entry, token) ? entry : undefined;
  }

  /** Records a new claim's lock for a key with no entry, keeping the lower bound true. */
  hold(entry: Entry): void {
    this.entries.set(entry.key, entry);
    this.claims++;
    this.renew(entry, entry.until);
  }

  /** Hands an expired claim to a new owner: the token `tokens` issued last, a new lock, the same record. */
  takeOver(lock: Entry, tokens: Tokens, until: number): void {
    lock.prefix = tokens.prefix;
    lock.serial = tokens.serial;
    lock.token = tokens.last;
    this.renew(lock, until);
  }

  /** Moves a held lock's end, keeping the lower bound true: an extension may also shorten it. */
  renew(entry: Entry, until: number): void {
    entry.until = until;
    if (until < this.#claimsLiveUntil) this.#claimsLiveUntil = until;
  }

  /** Forgets a claim (released, or replaced by a stale event's record). */
  release(lock: Entry): void {
    this.entries.delete(lock.key);
    this.claims--;
  }

  /** Turns a held claim into a completion, remembered until `until`, at the back of the order. */
  complete(lock: Entry, until: number): void {
    lock.done = true;
    lock.token = undefined;
    this.claims--;
    this.#queue(lock, until);
  }

  /** Records a completion for a key with no entry (a stale event's), at the back of the order. */
  remember(completion: Entry, until: number): void {
    completion.done = true;
    this.entries.set(completion.key, completion);
    this.#queue(completion, until);
  }

  #queue(completion: Entry, until: number): void {
    completion.until = until;
    this.#order.push(completion);
    // A completion deleted from the map (its id claimed again after it expired) stays queued until
    // it reaches the front; rebuilt from the map when such leftovers outnumber the live ones, the
    // queue stays within twice the map's size.
    if (this.#order.length - this.#head > 2 * this.entries.size + 1024) {
      this.#order = this.#order.filter((entry) => entry.done);
      this.#head = 0;
    }
  }

  /** The oldest completion still remembered, leftovers at the front dropped on the way. */
  #oldest(): Entry | undefined {
    const order = this.#order;
    while (this.#head < order.length) {
      const first = order[this.#head]!;
      if (first.done) return first;
      this.#head++;
    }
    // Drained: start again at the beginning of a fresh array rather than grow this one forever.
    if (this.#head > 0) {
      this.#order = [];
      this.#head = 0;
    }
    return undefined;
  }

  /** Forgets a completion (expired, or making room). */
  drop(completion: Entry): void {
    completion.done = false;
    this.entries.delete(completion.key);
  }

  #forget(completion: Entry): true {
    this.drop(completion);
    this.#head++;
    // The array is cut down once its dropped front is at least half of it: amortised O(1).
    if (this.#head >= 1024 && this.#head * 2 >= this.#order.length) {
      this.#order = this.#order.slice(this.#head);
      this.#head = 0;
    }
    return true;
  }

  /**
   * Room for one more entry, freeing the least valuable one: an expired completion, then an
   * expired claim, then the oldest completion still remembered (the bound forgets it early:
   * documented), but never a claim whose lock still holds. `false` when every entry is a live
   * claim.
   */
  makeRoom(time: number): boolean {
    if (this.entries.size < this.max) return true;
    const first = this.#oldest();
    if (first !== undefined && first.until <= time) return this.#forget(first);
    // Past the lower bound, a lock may have run out: one pass frees every expired claim and finds
    // the next bound. The pass walks the completions too, so it frees them all at once rather
    // than one a pass, and runs at most once per lock length, not once per claim.
    if (this.claims > 0 && time >= this.#claimsLiveUntil) {
      let earliest = Number.POSITIVE_INFINITY;
      let freed = false;
      for (const entry of this.entries.values()) {
        if (entry.done) continue;
        if (entry.until <= time) {
          this.release(entry);
          freed = true;
        } else if (entry.until < earliest) {
          earliest = entry.until;
        }
      }
      this.#claimsLiveUntil = earliest;
      if (freed) return true;
    }
    if (first !== undefined) return this.#forget(first);
    return false;
  }
}
