/**
 * With `CI` set and no PostgreSQL at all, `vitest` must fail saying that PostgreSQL is missing,
 * on its first line, before its banner, as it does for Redis.
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');

it('fails on the first line with "PostgreSQL is missing" when CI is set and PostgreSQL is nowhere', { timeout: 120_000 }, () => {
  // A PATH with node on it and nothing else, and an empty folder in place of Debian's versions.
  const bin = mkdtempSync(join(tmpdir(), 'webhook-receiver-no-postgres-'));
  try {
    symlinkSync(process.execPath, join(bin, 'node'));
    // REDIS_URL set: only PostgreSQL is missing (the check reads it, nothing connects).
    const env: NodeJS.ProcessEnv = { ...process.env, CI: '1', PATH: bin, REDIS_URL: 'redis://127.0.0.1:1', WEBHOOK_RECEIVER_POSTGRES_VERSIONS_DIR: bin };
    delete env.DATABASE_URL;
    const result = spawnSync(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', 'test/core/secrets.test.ts'], {
      cwd: root,
      env,
      encoding: 'utf8',
      timeout: 110_000,
    });
    expect(result.status).toBe(1);
    const output = `${result.stderr}${result.stdout}`.trimStart();
    expect(output.split('\n')[0]).toMatch(/^PostgreSQL is missing: initdb and pg_ctl are not on the PATH \(nor in \/usr\/lib\/postgresql\/\*\/bin\) and DATABASE_URL is unset/);
    expect(output).not.toContain('RUN');
    expect(output).not.toContain('No test files found');
  } finally {
    rmSync(bin, { recursive: true, force: true });
  }
});
