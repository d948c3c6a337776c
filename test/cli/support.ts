/**
 * What the command's tests share: running `webhook-receiver` as a child process the way a person
 * runs it, and checking that no secret shows in what it printed.
 */

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { resolve } from 'node:path';
import { cliArgs } from '../support/cli-entry.ts';
import { OTHER_SECRET, SECRET, expectNoSecrets } from '../testing/support.ts';

export const root = resolve(import.meta.dirname, '../..');
/** The environment without WEBHOOK_SECRET, so only what a test passes is configured. */
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'WEBHOOK_SECRET'));

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the command to completion (bounded by a timeout), feeding `input` on stdin. */
export function run(args: string[], options: { input?: string | Uint8Array; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<Result> {
  const cli = cliArgs();
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [...cli, ...args], { cwd: root, env: { ...baseEnv, ...options.env }, timeout: options.timeoutMs ?? 20_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

/** Neither test secret (nor the given signatures) appears in the output. */
export function noSecrets(result: Result, signatures: string[] = []): void {
  expectNoSecrets(result.stdout + result.stderr, [SECRET, OTHER_SECRET], signatures);
}

/** A `listen` child process, with a way to wait for its output. */
export interface Listening {
  child: ChildProcessWithoutNullStreams;
  url: string;
  output: () => string;
  /** Resolves with the pattern's first group (or whole match) once stdout has it. */
  waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<string>;
  exit: Promise<number | null>;
}

/**
 * Starts `webhook-receiver listen` and resolves once it prints its URL. It is killed after
 * `killAfterMs` whatever happens, so it never outlives the test file; `waitMs` bounds each wait.
 */
export async function listen(args: string[], env: Record<string, string> = {}, { killAfterMs = 30_000, waitMs = 10_000 } = {}): Promise<Listening> {
  const child = spawn(process.execPath, [...cliArgs(), 'listen', ...args], { cwd: root, env: { ...baseEnv, ...env } });
  let stdout = '';
  let stderr = '';
  const listeners = new Set<() => void>();
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    for (const listener of listeners) listener();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exit = new Promise<number | null>((resolvePromise) => child.on('close', resolvePromise));
  const killer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  void exit.then(() => clearTimeout(killer));
  const waitFor = (pattern: RegExp, timeoutMs = waitMs) =>
    new Promise<string>((resolvePromise, reject) => {
      const check = () => {
        const match = pattern.exec(stdout);
        if (!match) return false;
        listeners.delete(check);
        clearTimeout(timer);
        resolvePromise(match[1] ?? match[0]);
        return true;
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`no ${pattern} within ${timeoutMs} ms; stdout:\n${stdout}\nstderr:\n${stderr}`));
      }, timeoutMs);
      if (!check()) listeners.add(check);
    });
  const url = await waitFor(/^listening on (http:\/\/127\.0\.0\.1:\d+) /m);
  return { child, url, output: () => stdout + stderr, waitFor, exit };
}
