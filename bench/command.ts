/** What the bench's commands share: their whole-number options, and running only when started as a command. */

import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** `--<name>`'s value as a whole number above 0, or a TypeError that says what it got. */
export function wholeNumber(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new TypeError(`--${name} takes a whole number above 0; got ${JSON.stringify(text)}`);
  return value;
}

/**
 * Runs `main` when the module at `url` is the command the process was started with (tests import
 * the same module's functions without running it), then exits: 1 with the error's message when
 * it fails.
 */
export function runAsCommand(url: string, main: () => Promise<void>): void {
  if (process.argv[1] === undefined || resolve(process.argv[1]) !== fileURLToPath(url)) return;
  main().then(
    () => process.exit(process.exitCode ?? 0),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
