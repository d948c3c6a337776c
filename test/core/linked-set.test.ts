/**
 * The set that keeps a keeper's running claims: members linked through their own fields, so that
 * adding and removing one allocates nothing. What it must keep is a set's behaviour.
 */

import { describe, expect, it } from 'vitest';
import { LinkedSet, type Linked } from '../../src/lib/linked-set.ts';

class Member implements Linked<Member> {
  prev: Member | undefined;
  next: Member | undefined;
  constructor(readonly name: string) {}
}

const names = (set: LinkedSet<Member>) => set.snapshot().map((m) => m.name);

describe('LinkedSet', () => {
  it('holds each member once, newest first, and forgets the one removed wherever it is', () => {
    const set = new LinkedSet<Member>();
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => new Member(name)) as [Member, Member, Member, Member];
    for (const m of [a, b, c, d]) set.add(m);
    set.add(b);
    expect(names(set)).toEqual(['d', 'c', 'b', 'a']);
    expect(set.snapshot()).toHaveLength(4);
    expect([a, b, c, d].every((m) => set.has(m))).toBe(true);
    // The middle, the last (oldest) and the first (newest).
    set.delete(c);
    expect(names(set)).toEqual(['d', 'b', 'a']);
    set.delete(a);
    expect(names(set)).toEqual(['d', 'b']);
    set.delete(d);
    expect(names(set)).toEqual(['b']);
    expect(set.snapshot()).toHaveLength(1);
    // Removing a member twice, or one never added, changes nothing.
    set.delete(d);
    set.delete(new Member('e'));
    expect(names(set)).toEqual(['b']);
    expect(set.snapshot()).toHaveLength(1);
    // A removed member keeps no link into the set, and can be added again.
    expect([c.prev, c.next, set.has(c)]).toEqual([undefined, undefined, false]);
    set.add(c);
    expect(names(set)).toEqual(['c', 'b']);
  });

  it('empties, and hands out a copy that a walk may change the set under', () => {
    const set = new LinkedSet<Member>();
    const members = ['a', 'b', 'c'].map((name) => new Member(name));
    for (const m of members) set.add(m);
    const seen: string[] = [];
    // Each member visited removes every other one: the copy still visits all three.
    for (const m of set.snapshot()) {
      seen.push(m.name);
      for (const other of members) if (other !== m) set.delete(other);
    }
    expect(seen).toEqual(['c', 'b', 'a']);
    // Clearing hands back what the set held.
    set.add(members[0]!);
    set.add(members[1]!);
    expect(set.clear().map((m) => m.name)).toEqual(['b', 'a']);
    expect(set.empty).toBe(true);
    expect(names(set)).toEqual([]);
    expect(members.every((m) => !set.has(m) && m.prev === undefined && m.next === undefined)).toBe(true);
  });
});
