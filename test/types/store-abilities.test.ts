/**
 * What a store can do, said by its type: `ordering` holds all five ordering operations or is
 * absent, so a store that lacks one does not compile. Checked by the type checker (`tsc -p
 * tsconfig.json` runs on this file: an `@ts-expect-error` that stops erroring fails it) and run
 * by vitest, where the run-time check catches what no type stops (a store written in JavaScript).
 */

import { describe, expect, expectTypeOf, it } from 'vitest';
import { JobRunner } from '../../src/inbox/worker.ts';
import { createReceiver } from '../../src/receiver.ts';
import { generateSecret } from '../../src/sign.ts';
import { memoryStore } from '../../src/stores/memory/index.ts';
import type { IdempotencyStore, OrderingOperations } from '../../src/stores/types.ts';

const secrets = generateSecret();
const ordering = { key: () => 'entity', version: () => 1 };

describe('IdempotencyStore.ordering', () => {
  const memory = memoryStore();
  const { forgetVersion: _forget, ...fourOperations } = memory.ordering;

  it('types every shipped ordering store as having it, and the contract as maybe', () => {
    expectTypeOf(memory.ordering).toEqualTypeOf<OrderingOperations>();
    expectTypeOf<IdempotencyStore['ordering']>().toEqualTypeOf<OrderingOperations | undefined>();
  });

  it('does not compile with an ordering that lacks an operation, or with the operations flat on the store', () => {
    const whole: IdempotencyStore = { claim: memory.claim, complete: memory.complete, release: memory.release, ordering: memory.ordering };
    // @ts-expect-error forgetVersion is missing: the ordering operations come all five together
    const partial: IdempotencyStore = { claim: memory.claim, complete: memory.complete, release: memory.release, ordering: fourOperations };
    // @ts-expect-error the ordering operations live in `ordering`, not on the store
    const flat: IdempotencyStore = { claim: memory.claim, complete: memory.complete, release: memory.release, claimOrdered: memory.ordering.claimOrdered };
    expect(createReceiver({ secrets, ordering, idempotency: { store: whole } })).toBeDefined();
    // What the types refuse, the receiver refuses too when it comes from code no type checked.
    expect(() => createReceiver({ secrets, idempotency: { store: partial } })).toThrow(/ordering has no forgetVersion/);
    expect(() => createReceiver({ secrets, ordering, idempotency: { store: flat } })).toThrow(/has no ordering operations/);
    // An inbox's worker checks the store it is given the same way, before it takes a job.
    expect(() => new JobRunner(() => {}, { idempotency: { store: partial } }, 3, 'test', 60)).toThrow(
      new TypeError(
        'work idempotency.store ordering has no forgetVersion: the ordering operations (claimOrdered, completeOrdered, releaseOrdered, extendOrdered, forgetVersion) come all together',
      ),
    );
  });

  it('is checked by a worker as by a receiver: an extend that is not a function is refused, not taken for a store that cannot renew', () => {
    const odd = { claim: memory.claim, complete: memory.complete, release: memory.release, extend: 'yes' } as never;
    expect(() => createReceiver({ secrets, idempotency: { store: odd } })).toThrow(new TypeError('idempotency.store extend must be a function when present'));
    expect(() => new JobRunner(() => {}, { idempotency: { store: odd } }, 3, 'test', 60)).toThrow(
      new TypeError('work idempotency.store extend must be a function when present'),
    );
  });

  it('lets a store without ordering say so by leaving it out', () => {
    const plain: IdempotencyStore = { claim: memory.claim, complete: memory.complete, release: memory.release };
    expectTypeOf(plain.ordering).toEqualTypeOf<OrderingOperations | undefined>();
    expect(() => createReceiver({ secrets, ordering, idempotency: { store: plain } })).toThrow(/has no ordering operations/);
  });
});
