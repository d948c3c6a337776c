/**
 * `npm run checks` (the first step of `npm test`): the build and every check that is not a test,
 * in lanes that run at the same time. Each lane is a list of npm scripts run one after another;
 * the lanes share nothing, so they run side by side. Each tool is mostly single-threaded: one
 * after another they left a core of two idle (155 s on two idle cores, 132 s side by side; on a
 * loaded machine about 260 s and 175 s):
 *
 *   build, then check:package   (publint and attw read the build)
 *   typecheck:core              (the core and the runtime-neutral adapters, without Node's types)
 *   typecheck:all               (everything, with Node's types)
 *   lint                        (typescript-eslint, type-aware)
 *   docs                        (TypeDoc, warnings as errors)
 *   knip                        (dead code and unused dependencies)
 *
 * A lane's output is held until it ends and then printed whole, under a line naming it, so that
 * lanes never interleave. Every lane runs to its end even when another failed, so one run names
 * every failing check; the exit code is 1 when any failed.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

const LANES: readonly (readonly string[])[] = [['build', 'check:package'], ['typecheck:core'], ['typecheck:all'], ['lint'], ['docs'], ['knip']];

const running = new Set<ChildProcess>();

/** Runs one npm script to its end: its exit code and everything it printed, in order. */
function runScript(script: string): Promise<{ code: number; output: string }> {
  return new Promise((resolvePromise) => {
    // npm itself runs on the machine's own Node; the script's tools run as `npm test` runs them.
    const child = spawn('npm', ['run', '--silent', script], { cwd: root, env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? '0' } });
    running.add(child);
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', (error) => {
      running.delete(child);
      resolvePromise({ code: 1, output: `${output}could not start npm: ${error.message}\n` });
    });
    child.once('close', (code, signal) => {
      running.delete(child);
      resolvePromise({ code: code ?? 1, output: signal === null ? output : `${output}(ended by ${signal})\n` });
    });
  });
}

/** Runs a lane's scripts one after another, stopping at the first that fails. */
async function runLane(lane: readonly string[]): Promise<boolean> {
  for (const [index, script] of lane.entries()) {
    const started = performance.now();
    const { code, output } = await runScript(script);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    process.stdout.write(`\nchecks: ${script} ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${seconds} s\n${output}`);
    if (code !== 0) {
      const skipped = lane.slice(index + 1);
      if (skipped.length > 0) process.stdout.write(`checks: ${skipped.join(', ')} not run (${script} failed)\n`);
      return false;
    }
  }
  return true;
}

// Stopped from outside (Ctrl-C, CI's cancel): stop the lanes too, by their pids, and go.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const child of running) child.kill(signal);
    process.exit(1);
  });
}

const started = performance.now();
const results = await Promise.all(LANES.map(runLane));
const seconds = ((performance.now() - started) / 1000).toFixed(1);
const failed = LANES.filter((_, index) => !results[index]).map((lane) => lane.join(' → '));
process.stdout.write(failed.length === 0 ? `\nchecks: all passed in ${seconds} s\n` : `\nchecks: FAILED in ${seconds} s: ${failed.join('; ')}\n`);
process.exitCode = failed.length === 0 ? 0 : 1;
