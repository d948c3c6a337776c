/**
 * A correction to fauxqs's data folder (`dataDir`), for the tests that restart it. Made visible
 * again at once (`ChangeMessageVisibility` to 0), a message has its row rewritten with NULL in the
 * NOT NULL receive-count column: the statement fails, and the request is answered HTTP 500. SQS
 * keeps a message's receive count when its visibility changes, so the correction clears only the
 * receipt handle and the deadline. Applied once per process, to the module fauxqs itself loads.
 */

import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The part of fauxqs's persistence class the correction replaces (not part of its public API). */
interface PersistenceManagerLike {
  prototype: {
    db: { prepare(sql: string): { run(...values: unknown[]): unknown } };
    updateMessageReady(messageId: string): void;
  };
}

let corrected: Promise<void> | undefined;

/** Corrects fauxqs's `updateMessageReady` in this process; resolves once done. */
export function keepReceiveCountOnRelease(): Promise<void> {
  corrected ??= (async () => {
    // fauxqs exports only its app; the persistence module is its sibling in the same folder.
    const app = fileURLToPath(import.meta.resolve('fauxqs'));
    const module = (await import(pathToFileURL(join(app, '..', 'persistence.js')).href)) as { PersistenceManager?: PersistenceManagerLike };
    const manager = module.PersistenceManager;
    if (typeof manager?.prototype.updateMessageReady !== 'function') throw new Error("fauxqs's persistence changed: PersistenceManager.updateMessageReady is gone; review this correction");
    manager.prototype.updateMessageReady = function (this: PersistenceManagerLike['prototype'], messageId: string) {
      this.db.prepare('UPDATE sqs_messages SET receipt_handle = NULL, visibility_deadline = NULL WHERE message_id = ?').run(messageId);
    };
  })();
  return corrected;
}
