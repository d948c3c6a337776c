/**
 * With `CI` set and no Redis at all, `vitest` must fail saying that `redis-server` is missing, on
 * its first line (issue 12: it used to print "No test files found" first).
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');

it('fails on the first line with "redis-server is missing" when CI is set and Redis is nowhere', { timeout: 120_000 }, () => {
  // A PATH with node on it and nothing else, so no redis-server can be found.
  const bin = mkdtempSync(join(tmpdir(), 'webhook-receiver-no-redis-'));
  try {
    symlinkSync(process.execPath, join(bin, 'node'));
    const env: NodeJS.ProcessEnv = { ...process.env, CI: '1', PATH: bin };
    delete env.REDIS_URL;
    const result = spawnSync(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', 'test/core/secrets.test.ts'], {
      cwd: root,
      env,
      encoding: 'utf8',
      timeout: 110_000,
    });
    expect(result.status).toBe(1);
    const output = `${result.stderr}${result.stdout}`.trimStart();
    expect(output.split('\n')[0]).toMatch(/^redis-server is missing: it is not on the PATH and REDIS_URL is unset/);
    expect(output).not.toContain('No test files found');
  } finally {
    rmSync(bin, { recursive: true, force: true });
  }
});
