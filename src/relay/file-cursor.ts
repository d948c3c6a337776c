/**
 * `fileCursor(path)`: the resume cursor in a file, for a process on a machine with a disk (a
 * laptop, a container with a volume). Node-only: `node:fs` is reached through
 * `process.getBuiltinModule` when it is first used, so this module loads anywhere and fails with a
 * `TypeError` where there is no file system (a Worker keeps its cursor with `keyValueCursor`).
 */

import type { CursorStore } from './cursor.ts';

/** The few `node:fs/promises` calls used here, typed without Node's types (the core compiles without them). */
interface FsPromises {
  readFile(path: string, encoding: 'utf8'): Promise<string>;
  open(path: string, flags: string, mode: number): Promise<{ writeFile(data: string): Promise<void>; sync(): Promise<void>; close(): Promise<void> }>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
}

function fsPromises(): FsPromises {
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  const fs = typeof proc?.getBuiltinModule === 'function' ? (proc.getBuiltinModule('node:fs/promises') as FsPromises | undefined) : undefined;
  if (fs === undefined) throw new TypeError('fileCursor needs Node (22 or later): keep the cursor with keyValueCursor where there is no file system');
  return fs;
}

let sequence = 0;

/**
 * A {@link CursorStore} in a file: created on the first save (mode 0600), replaced atomically on
 * each one (written to a temporary file beside it, flushed, then renamed over it), so a crash
 * leaves the old cursor or the new one, never half of one. One file per trigger.
 *
 * @example
 * ```ts
 * import { fileCursor, relayClient, triggerSource } from 'webhook-receiver/relay';
 * import { createReceiver } from 'webhook-receiver';
 * const source = triggerSource({
 *   relay: relayClient({ baseUrl: process.env.RELAY_URL!, apiKey: process.env.RELAY_API_KEY! }),
 *   triggerId: process.env.RELAY_TRIGGER_ID!,
 *   cursor: fileCursor('.relay-cursor'),
 *   receiver: createReceiver({ secrets: process.env.WEBHOOK_SECRET! }),
 *   handler: async (webhook) => console.log(webhook.id),
 * });
 * ```
 */
export function fileCursor(path: string): CursorStore {
  if (typeof path !== 'string' || path === '') throw new TypeError('fileCursor needs the path of the file to keep the cursor in');
  return {
    async load() {
      let text: string;
      try {
        text = await fsPromises().readFile(path, 'utf8');
      } catch (error) {
        if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
        throw error;
      }
      const cursor = text.trim();
      // An empty file (created by hand, or by a tool that truncated it) means no cursor yet.
      return cursor === '' ? undefined : cursor;
    },
    async save(cursor) {
      if (typeof cursor !== 'string' || cursor === '' || /[\r\n]/.test(cursor)) throw new TypeError('fileCursor: a cursor is a non-empty string on one line');
      const fs = fsPromises();
      const temporary = `${path}.${Date.now().toString(36)}${(sequence++).toString(36)}.tmp`;
      const handle = await fs.open(temporary, 'wx', 0o600);
      try {
        await handle.writeFile(`${cursor}\n`);
        await handle.sync();
      } catch (error) {
        await handle.close();
        await fs.unlink(temporary).catch(() => undefined);
        throw error;
      }
      await handle.close();
      try {
        await fs.rename(temporary, path);
      } catch (error) {
        await fs.unlink(temporary).catch(() => undefined);
        throw error;
      }
    },
  };
}
