/**
 * With `CI` set and a server the tests need missing, `vitest` must fail saying which one, on its
 * first line, before its banner (a message printed later, after "No test files found", is easily missed).
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');

/**
 * Runs one small test file with a PATH that has node on it and nothing else, `env(bin)` on top of
 * this process's environment (`bin` is that PATH's only folder): its exit status and its output.
 */
function runWithBarePath(env: (bin: string) => NodeJS.ProcessEnv, args: readonly string[] = []): { status: number | null; output: string } {
  const bin = mkdtempSync(join(tmpdir(), 'webhook-receiver-bare-path-'));
  try {
    symlinkSync(process.execPath, join(bin, 'node'));
    const result = spawnSync(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', ...args, 'test/core/secrets.test.ts'], {
      cwd: root,
      env: { ...process.env, CI: '1', PATH: bin, ...env(bin) },
      encoding: 'utf8',
      timeout: 110_000,
    });
    return { status: result.status, output: `${result.stderr}${result.stdout}`.trimStart() };
  } finally {
    rmSync(bin, { recursive: true, force: true });
  }
}

it('fails on the first line with "redis-server is missing" when CI is set and Redis is nowhere', { timeout: 120_000 }, () => {
  // No redis-server on the PATH, and REDIS_URL unset.
  const { status, output } = runWithBarePath(() => ({ REDIS_URL: undefined }));
  expect(status).toBe(1);
  expect(output.split('\n')[0]).toMatch(/^redis-server is missing: it is not on the PATH and REDIS_URL is unset/);
  expect(output).not.toContain('No test files found');
});

it('fails on the first line with "PostgreSQL is missing" when CI is set and PostgreSQL is nowhere', { timeout: 120_000 }, () => {
  // REDIS_URL set: only PostgreSQL is missing (the check reads it, nothing connects). An empty
  // folder stands in for Debian's versions, and DATABASE_URL is unset.
  const { status, output } = runWithBarePath((bin) => ({ REDIS_URL: 'redis://127.0.0.1:1', WEBHOOK_RECEIVER_POSTGRES_VERSIONS_DIR: bin, DATABASE_URL: undefined }));
  expect(status).toBe(1);
  expect(output.split('\n')[0]).toMatch(/^PostgreSQL is missing: initdb and pg_ctl are not on the PATH \(nor in \/usr\/lib\/postgresql\/\*\/bin\) and DATABASE_URL is unset/);
  expect(output).not.toContain('RUN');
  expect(output).not.toContain('No test files found');
});

it('runs the unit tier with CI set and neither server anywhere: it needs none and starts none', { timeout: 120_000 }, () => {
  const { status, output } = runWithBarePath((bin) => ({ REDIS_URL: undefined, DATABASE_URL: undefined, WEBHOOK_RECEIVER_POSTGRES_VERSIONS_DIR: bin }), ['--project', 'unit']);
  expect(output).not.toContain('is missing');
  expect(output).not.toContain('NOTICE');
  expect(stripVTControlCharacters(output)).toMatch(/Test Files\s+1 passed/);
  expect(status).toBe(0);
});
