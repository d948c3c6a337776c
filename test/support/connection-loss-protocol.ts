/** What the connection-loss test and its child process share (test/stores/connection-loss.test.ts, ./connection-loss-child.ts). */

/** Where a delivery's transaction loses its connection (see ./connection-loss-child.ts). */
export type Cut = 'idle' | 'statement' | 'commit' | 'hold';

/** One delivery, parent to child. */
export interface LossRequest {
  seq: number;
  headers: Record<string, string>;
  body: string;
  cut?: Cut;
}

/** The store's connections at the end of a run. */
export interface LossStats {
  /** Connections the store handed back to the pool as broken (`release(error)`). */
  brokenReleases: number;
  /** Connections the pool closed and dropped. */
  removed: number;
  /** Connections checked out at once at the end (all the pool holds). */
  checked: number;
  /** How many of them answered `SELECT 1`. */
  healthy: number;
  /** How many of them had been released as broken before (must be none). */
  reused: number;
  /** Accepting into pg-boss: the queue's jobs, and how many webhook ids they carry. */
  jobs?: { rows: number; distinct: number };
}

/** The child's answers. */
export type LossReply =
  | { ready: true }
  | { seq: number; outcome: string }
  | { seq: number; error: { name: string; code?: string; status?: number; message: string; cause?: string } }
  | { held: number }
  | { stats: LossStats };
