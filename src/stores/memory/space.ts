/** One key class's entries of the memory store (signed or unsigned ids): live claims and completions, bounded. */

/**
 * A live claim (its owner's token, until when its lock holds) or a completion (its token, until
 * when it is remembered). One shape for both: a completion is its claim's record, moved from one
 * map to the other, so completing allocates nothing.
 */
export interface Entry {
  /** The id's key, so the order of completions can find a completion in the map. */
  key: string;
  token: string;
  until: number;
  /** A completion still in the map: set false when it leaves, so the order needs no look-up. */
  live: boolean;
}

type Completion = Entry;

/**
 * One key class's entries. Live claims and completed ids are kept in two maps. Completions are
 * also queued in the order they were recorded: completions of one endpoint share one TTL, so the
 * first completion is the first to expire, and finding room is a look at the front of the queue
 * rather than a scan.
 *
 * The queue is an array with a moving head, not the map's own order: a `Map` keeps the slots of
 * deleted entries until it is rehashed, so reading the first entry of a map used as a queue skips
 * every entry deleted from its front since, which made each claim of a full store cost a pass
 * over tens of thousands of holes.
 */
export class Space {
  readonly claims = new Map<string, Entry>();
  readonly done = new Map<string, Completion>();
  #order: Completion[] = [];
  #head = 0;
  /**
   * A time before which no claim's lock runs out (a lower bound on the earliest `until`): while
   * the clock is below it, a full store of live claims is known without a scan, so a store that
   * is full under load does not pay a pass over every claim per request.
   */
  #claimsLiveUntil = 0;
  constructor(readonly max: number) {}

  /** Records a claim's lock, keeping the lower bound true (locks may differ in length). */
  hold(key: string, entry: Entry): void {
    this.claims.set(key, entry);
    this.renew(entry, entry.until);
  }

  /** Moves a held lock's end, keeping the lower bound true: an extension may also shorten it. */
  renew(entry: Entry, until: number): void {
    entry.until = until;
    if (until < this.#claimsLiveUntil) this.#claimsLiveUntil = until;
  }

  /** Records a completion, at the back of the order. */
  remember(completion: Completion, until: number): void {
    completion.until = until;
    completion.live = true;
    this.done.set(completion.key, completion);
    this.#order.push(completion);
    // A completion deleted from the map (its id claimed again after it expired) stays queued until
    // it reaches the front; rebuilt from the map when such leftovers outnumber the live ones, the
    // queue stays within twice the map's size.
    if (this.#order.length - this.#head > 2 * this.done.size + 1024) {
      this.#order = [...this.done.values()];
      this.#head = 0;
    }
  }

  /** The oldest completion still remembered, leftovers at the front dropped on the way. */
  #oldest(): Completion | undefined {
    const order = this.#order;
    while (this.#head < order.length) {
      const first = order[this.#head]!;
      if (first.live) return first;
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
  drop(completion: Completion): void {
    completion.live = false;
    this.done.delete(completion.key);
  }

  #forget(completion: Completion): true {
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
    if (this.claims.size + this.done.size < this.max) return true;
    const first = this.#oldest();
    if (first !== undefined && first.until <= time) return this.#forget(first);
    if (time >= this.#claimsLiveUntil) {
      let earliest = Number.POSITIVE_INFINITY;
      for (const [key, entry] of this.claims) {
        if (entry.until <= time) {
          this.claims.delete(key);
          return true;
        }
        if (entry.until < earliest) earliest = entry.until;
      }
      this.#claimsLiveUntil = earliest;
    }
    if (first !== undefined) return this.#forget(first);
    return false;
  }
}
