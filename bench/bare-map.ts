/**
 * The least any bounded in-process deduplication does per delivery, as the floor that the memory
 * store is compared with (like with like): a `Map` of ids bounded like the store, where
 * a claim looks the id up, forgets the oldest id when full and inserts the new one, and a
 * completion marks it done. No locks, expiry, tokens, unsigned space or claim protocol: a floor,
 * not a store.
 */
export class BareIdMap {
  readonly #ids = new Map<string, 0 | 1>();
  #order: string[] = [];
  #head = 0;

  constructor(readonly max: number) {}

  /** False when the id is already held (a duplicate), else records it as in progress. */
  claim(id: string): boolean {
    if (this.#ids.has(id)) return false;
    if (this.#ids.size >= this.max) {
      this.#ids.delete(this.#order[this.#head++]!);
      // Drop the consumed half of the order now and then, so it stays bounded too.
      if (this.#head * 2 >= this.#order.length) {
        this.#order = this.#order.slice(this.#head);
        this.#head = 0;
      }
    }
    this.#ids.set(id, 0);
    this.#order.push(id);
    return true;
  }

  complete(id: string): void {
    this.#ids.set(id, 1);
  }

  get size(): number {
    return this.#ids.size;
  }
}
