/**
 * The demo, run the way the README says (`npm start`), in a child process: every row of its
 * table, exactly, and nothing secret in its output.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, run } from '../runtimes/harness.ts';

describe('the demo (npm start)', () => {
  it('is the start script', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toBe('tsx examples/demo.ts');
  });

  it('prints the table of what the receiver answered and how often the handler ran, and exits 0', async () => {
    const result = await run('npm', ['start', '--silent'], { cwd: root, timeoutMs: 30_000 });
    expect(result.code, result.stderr).toBe(0);

    expect(result.stdout).toMatch(/^receiver listening on http:\/\/127\.0\.0\.1:\d+ /m);
    const lines = result.stdout.split('\n');
    const header = lines.findIndex((line) => line.startsWith('case '));
    expect(lines[header]!.split('|').map((cell) => cell.trim())).toEqual(['case', 'HTTP status', 'outcome', 'handler runs']);
    const rows = lines
      .slice(header + 2)
      .filter((line) => line.includes(' | '))
      .map((line) => line.split(' | ').map((cell) => cell.trim()));
    expect(rows).toEqual([
      ['valid event', '200', 'processed, key "current"', '1'],
      ['tampered body', '401', 'SIGNATURE_MISMATCH', '0'],
      ['stale timestamp (10 min old)', '401', 'TIMESTAMP_TOO_OLD', '0'],
      ['millisecond timestamp', '400', 'INVALID_TIMESTAMP', '0'],
      ['duplicate (retry of the valid event)', '200', 'duplicate: handler skipped', '0'],
      ['10 concurrent duplicates', '1 × 200, 9 × 409', '1 × processed, 9 × IN_PROGRESS', '1'],
      ['signed during rotation (new + old key)', '200', 'processed, key "current"', '1'],
      ['signed with the previous key only', '200', 'processed, key "previous"', '1'],
      ['signed with a retired key only', '401', 'SIGNATURE_MISMATCH', '0'],
      ['unsigned event -> /webhooks', '401', 'MISSING_SIGNATURE', '0'],
      ["unsigned event -> unsigned: 'accept'", '200', 'processed, marked unsigned', '1'],
    ]);

    // The reasons are printed under the table, each saying which check failed.
    expect(result.stdout).toMatch(/^ {2}millisecond timestamp: webhook-timestamp "\d{13}" has 13 digits: it looks like milliseconds/m);
    expect(result.stdout).toMatch(/^ {2}stale timestamp \(10 min old\): webhook-timestamp is 60\d s in the past/m);
    // Keys are generated per run and named only by keyId.
    expect(`${result.stdout}${result.stderr}`).not.toMatch(/whsec_|whsk_|whpk_/);
  });
});
