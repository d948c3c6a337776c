/** What a `WebhookClaims` object keeps: one record per key (a claim or a completion), and ordering entities. */

/** One key's record: a live claim (`done` false) or a completion, until `until` (epoch ms). */
export interface ClaimRecord {
  token: string;
  done: boolean;
  until: number;
}

/** An ordering entity's record: its highest completed version (kept until `until`) and its lock. */
export interface EntityRecord {
  version: string | null;
  lockToken: string | null;
  lockUntil: number;
  /** Never before `lockUntil`, so clean-up never drops a live lock. */
  until: number;
}

/** Where an object keeps its records: SQL (synchronous) or key-value (awaited) storage. */
export interface Records {
  entity(key: string): EntityRecord | undefined | Promise<EntityRecord | undefined>;
  putEntity(key: string, record: EntityRecord): void | Promise<void>;
  get(key: string): ClaimRecord | undefined | Promise<ClaimRecord | undefined>;
  put(key: string, record: ClaimRecord): void | Promise<void>;
  delete(key: string): void | Promise<unknown>;
  /** Deletes records expired at `time`; answers the earliest `until` left, if any. */
  sweep(time: number): number | undefined | Promise<number | undefined>;
  /**
   * In an unsigned bucket's object, room for `key` among at most `ways` records: deletes other
   * keys' expired records, then, if the bucket is still full, the completion that expires first
   * (forgotten early). `false`: every other record is a live claim.
   */
  admit(key: string, time: number, ways: number): boolean | Promise<boolean>;
  /** After `deleteAll()`, which also drops the table. */
  forget(): void;
}
