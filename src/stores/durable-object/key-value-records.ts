/**
 * The records of an object on the older key-value backend (`new_classes`): each read and write is
 * awaited, and only storage awaits sit between them, which the input gate covers.
 */

import type { DurableObjectStorageLike } from './bindings.ts';
import type { ClaimRecord, EntityRecord, Records } from './records.ts';

export function keyValueRecords(storage: DurableObjectStorageLike): Records {
  return {
    // An entity's key (`…:o:…`) never names an id, so both kinds of record share the storage.
    entity: async (key) => (await storage.get(key)) as EntityRecord | undefined,
    putEntity: (key, record) => storage.put(key, record),
    get: async (key) => (await storage.get(key)) as ClaimRecord | undefined,
    put: (key, record) => storage.put(key, record),
    delete: (key) => storage.delete(key),
    async sweep(time) {
      let next: number | undefined;
      for (const [key, value] of await storage.list()) {
        const until = (value as Partial<ClaimRecord> | undefined)?.until;
        if (typeof until !== 'number' || until <= time) await storage.delete(key);
        else if (next === undefined || until < next) next = until;
      }
      return next;
    },
    async admit(key, time, ways) {
      let held = 0;
      let oldest: [string, number] | undefined;
      for (const [other, value] of await storage.list()) {
        if (other === key) continue;
        const until = (value as Partial<ClaimRecord> | undefined)?.until;
        if (typeof until !== 'number' || until <= time) await storage.delete(other);
        else {
          held++;
          if ((value as ClaimRecord).done && (oldest === undefined || until < oldest[1])) oldest = [other, until];
        }
      }
      if (held < ways) return true;
      if (oldest === undefined) return false;
      await storage.delete(oldest[0]);
      return true;
    },
    forget() {},
  };
}
