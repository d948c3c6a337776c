/**
 * What the command's tests share: running `webhook-receiver` as a child process the way a person
 * runs it, and checking that no secret shows in what it printed.
 */

import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { OTHER_SECRET, SECRET, expectNoSecrets } from '../testing/support.ts';

export const root = resolve(import.meta.dirname, '../..');
/** The environment without WEBHOOK_SECRET, so only what a test passes is configured. */
export const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'WEBHOOK_SECRET'));
export const CLI = [process.execPath, '--import', 'tsx', join(root, 'src/cli/index.ts')] as const;

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the command to completion (bounded by a timeout), feeding `input` on stdin. */
export function run(args: string[], options: { input?: string | Uint8Array; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<Result> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(CLI[0], [...CLI.slice(1), ...args], { cwd: root, env: { ...baseEnv, ...options.env }, timeout: options.timeoutMs ?? 20_000 });
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
