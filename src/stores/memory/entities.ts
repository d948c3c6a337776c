/** The memory store's ordering entities: each one's highest completed version and its lock, bounded. */

/** One ordering entity: its highest completed version (kept until `until`) and its lock. */
export interface EntityRecord {
  version: string | undefined;
  until: number;
  lockToken: string | undefined;
  lockUntil: number;
}

/**
 * The ordering entities, at most `max` of them. At the bound it forgets an entity with nothing
 * live first (its version expired and no lock), then the entity recorded longest ago (its version
 * forgotten early, as the bound forgets completed ids: documented), but never one whose lock
 * holds. A `Map` keeps insertion order, and a recorded entity is moved to its end.
 */
export class Entities {
  readonly map = new Map<string, EntityRecord>();
  constructor(readonly max: number) {}

  /** The entity's record with expired parts cleared, or undefined. */
  get(entity: string, time: number): EntityRecord | undefined {
    const record = this.map.get(entity);
    if (record === undefined) return undefined;
    if (record.version !== undefined && record.until <= time) record.version = undefined;
    if (record.lockToken !== undefined && record.lockUntil <= time) record.lockToken = undefined;
    return record;
  }

  /** The entity's record, made (room found) when absent; `undefined` when every entity is locked. */
  make(entity: string, time: number): EntityRecord | undefined {
    const record = this.get(entity, time);
    if (record !== undefined) return record;
    if (this.map.size >= this.max && !this.#makeRoom(time)) return undefined;
    const made: EntityRecord = { version: undefined, until: 0, lockToken: undefined, lockUntil: 0 };
    this.map.set(entity, made);
    return made;
  }

  /** Moves a record to the back of the order (the most recently recorded). */
  touch(entity: string, record: EntityRecord): void {
    this.map.delete(entity);
    this.map.set(entity, record);
  }

  /** Drops the record when nothing in it is live. */
  tidy(entity: string, record: EntityRecord): void {
    if (record.version === undefined && record.lockToken === undefined) this.map.delete(entity);
  }

  #makeRoom(time: number): boolean {
    let oldestUnlocked: string | undefined;
    for (const [entity, record] of this.map) {
      const locked = record.lockToken !== undefined && record.lockUntil > time;
      if (!locked && (record.version === undefined || record.until <= time)) {
        this.map.delete(entity);
        return true;
      }
      if (!locked && oldestUnlocked === undefined) {
        oldestUnlocked = entity;
        // The oldest unlocked entity is known; an empty one further on would cost a whole pass.
        break;
      }
    }
    if (oldestUnlocked === undefined) return false;
    this.map.delete(oldestUnlocked);
    return true;
  }
}
