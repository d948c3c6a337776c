/** A set of objects linked through fields of their own, for sets that gain and lose members on every request. */

/** What a member of a {@link LinkedSet} carries: its neighbours while it is in the set. */
export interface Linked<T> {
  prev: T | undefined;
  next: T | undefined;
}

/**
 * A set whose members are linked through their own fields: adding one and removing it allocate
 * nothing, where a `Set` gets a new table when it is added to empty and when its last member
 * leaves. An object belongs to one such set at a time.
 */
export class LinkedSet<T extends Linked<T>> {
  #first: T | undefined;

  /** Whether `member` is in the set: the first member, or one with a neighbour before it. */
  has(member: T): boolean {
    return member.prev !== undefined || this.#first === member;
  }

  get empty(): boolean {
    return this.#first === undefined;
  }

  add(member: T): void {
    if (this.has(member)) return;
    member.next = this.#first;
    if (this.#first !== undefined) this.#first.prev = member;
    this.#first = member;
  }

  delete(member: T): void {
    if (!this.has(member)) return;
    if (member.prev !== undefined) member.prev.next = member.next;
    else this.#first = member.next;
    if (member.next !== undefined) member.next.prev = member.prev;
    member.prev = undefined;
    member.next = undefined;
  }

  /**
   * The members now, newest first: a copy, for walks that may change the set as they go (say, a
   * walk that runs the app's code, which may remove other members).
   */
  snapshot(): T[] {
    const all: T[] = [];
    for (let member = this.#first; member !== undefined; member = member.next) all.push(member);
    return all;
  }

  /** Empties the set; returns the members it had, newest first. */
  clear(): T[] {
    const all = this.snapshot();
    for (const member of all) {
      member.prev = undefined;
      member.next = undefined;
    }
    this.#first = undefined;
    return all;
  }
}
