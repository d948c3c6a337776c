/** A set of objects linked through fields of their own, for sets that gain and lose members on every request. */

/** What a member of a {@link LinkedSet} carries: its neighbours, and whether it is in the set. */
export interface Linked<T> {
  prev: T | undefined;
  next: T | undefined;
  listed: boolean;
}

/**
 * A set whose members are linked through their own fields: adding one and removing it allocate
 * nothing, where a `Set` gets a new table when it is added to empty and when its last member
 * leaves. An object belongs to one such set at a time.
 */
export class LinkedSet<T extends Linked<T>> {
  #first: T | undefined;
  size = 0;

  add(member: T): void {
    if (member.listed) return;
    member.listed = true;
    member.prev = undefined;
    member.next = this.#first;
    if (this.#first !== undefined) this.#first.prev = member;
    this.#first = member;
    this.size++;
  }

  delete(member: T): void {
    if (!member.listed) return;
    member.listed = false;
    if (member.prev !== undefined) member.prev.next = member.next;
    else this.#first = member.next;
    if (member.next !== undefined) member.next.prev = member.prev;
    member.prev = undefined;
    member.next = undefined;
    this.size--;
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

  clear(): void {
    for (const member of this.snapshot()) this.delete(member);
  }
}
