/**
 * The command line as the tests start it: its sources bundled with esbuild once per run (the
 * global setup ./cli-setup.ts builds it), then run with plain `node`. The packages it imports stay
 * external (resolved from the project's node_modules, as a user's install resolves them), and what
 * it loads lazily stays in chunks of its own, loaded when a command needs them, as in the
 * published build.
 *
 * Started through tsx instead, each run of the command took about twice as long (0.44 s against
 * 0.21 s to print its version, on two idle cores), most of it tsx's loader. The CLI's tests start
 * a few hundred processes, so that was minutes of a loaded CI run. The bundle is built from the
 * sources as the run starts, and again before each rerun in watch mode, so a test never runs a
 * stale build.
 */

import { inject } from 'vitest';

/**
 * The arguments that start `webhook-receiver` with `process.execPath`.
 *
 * @example
 * ```ts
 * const child = spawn(process.execPath, [...cliArgs(), 'generate-secret']);
 * ```
 */
export function cliArgs(): readonly string[] {
  return [inject('cliEntry')];
}
