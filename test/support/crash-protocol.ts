/** What the crash test and its child process share (test/stores/crash.test.ts, ./crash-child.ts). */

/** Where the child may kill itself: around the side effect's statement and around COMMIT. */
export const KILL_POINTS = ['before-effect', 'during-effect', 'after-effect', 'before-commit', 'after-commit'] as const;
export type KillPoint = (typeof KILL_POINTS)[number];

export type CrashStoreKind = 'pg' | 'postgres.js' | 'redis';

/** One delivery, parent to child. */
export interface ChildRequest {
  seq: number;
  headers: Record<string, string>;
  body: string;
}

/** The child's answer to a delivery, or its readiness. */
export type ChildReply = { seq: number; outcome: string } | { seq: number; error: string } | { ready: true };
