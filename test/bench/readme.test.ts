/** The benchmark guide's table, generated from bench/RESULTS.md (bench/readme.ts). */

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BENCH_PAGE, README_END, README_START, readmeTable, withReadmeTable } from '../../bench/readme.ts';
import { KEPT_MARKER, loadIsHigh, loadWarning, withKeptPart } from '../../bench/report.ts';

const root = resolve(import.meta.dirname, '../..');

const RESULTS = `# Benchmark results

Written by \`npm run bench\`: full run, started 2026-11-24 03:00 UTC, wall time 420 s.

## Targets (1 of 2 met)

| what | target | measured | from |  |
| --- | --- | --- | --- | --- |
| forged \`v1\` request ÷ bare HMAC check of it, 1 KiB, one key | ≤ 1.3 | 1.26 (1.20–1.31) | 3.3 µs vs 2.6 µs | pass |
| a row with a \\| pipe | ≥ 0.9 | 0.80 (0.70–0.90) | x | **MISS** |

## 1. Verify, per payload size
`;

describe('readmeTable', () => {
  it('lists every target with its measured figure, target and verdict', () => {
    expect(readmeTable(RESULTS)).toBe(
      [
        '1 of 2 targets met (full run, 2026-11-24 03:00 UTC):',
        '',
        '| what | measured | target |  |',
        '| --- | --- | --- | --- |',
        '| forged `v1` request ÷ bare HMAC check of it, 1 KiB, one key | 1.26 (1.20–1.31) | ≤ 1.3 | met |',
        '| a row with a \\| pipe | 0.80 (0.70–0.90) | ≥ 0.9 | missed |',
      ].join('\n'),
    );
  });

  it('refuses results without a targets table', () => {
    expect(() => readmeTable('# Benchmark results\n')).toThrow('bench/RESULTS.md has no "## Targets" table');
  });
});

describe('withReadmeTable', () => {
  it('replaces only the text between the markers', () => {
    const readme = `# x\n\nbefore\n${README_START}\nold table\n${README_END}\nafter\n`;
    expect(withReadmeTable(readme, RESULTS)).toBe(`# x\n\nbefore\n${README_START}\n${readmeTable(RESULTS)}\n${README_END}\nafter\n`);
  });

  it('refuses a page without the markers', () => {
    expect(() => withReadmeTable('# x\n', RESULTS)).toThrow('docs/benchmarks.md lacks the markers');
  });

  it('the committed benchmark guide holds the table of the committed results', () => {
    expect(BENCH_PAGE).toBe('docs/benchmarks.md');
    const readme = readFileSync(resolve(root, BENCH_PAGE), 'utf8');
    const results = readFileSync(resolve(root, 'bench/RESULTS.md'), 'utf8');
    expect(withReadmeTable(readme, results)).toBe(readme);
  });
});

describe('withKeptPart', () => {
  it('carries over what the previous RESULTS.md keeps below its marker, and only that', () => {
    const previous = `# Benchmark results\n\nold figures\n\n${KEPT_MARKER}\n\n## Verify on each Node line\n\nkept table\n`;
    expect(withKeptPart('# Benchmark results\n\nnew figures\n', previous)).toBe(
      `# Benchmark results\n\nnew figures\n\n${KEPT_MARKER}\n\n## Verify on each Node line\n\nkept table\n`,
    );
    expect(withKeptPart('new\n', '# old, no marker\n')).toBe('new\n');
    expect(withKeptPart('new\n', undefined)).toBe('new\n');
  });

  it('the committed RESULTS.md keeps the figures measured apart from the full run', () => {
    const results = readFileSync(resolve(root, 'bench/RESULTS.md'), 'utf8');
    const kept = results.slice(results.indexOf(KEPT_MARKER));
    expect(results.indexOf(KEPT_MARKER)).toBeGreaterThan(0);
    expect(kept).toContain('## Verify on each Node line');
    expect(kept).toContain('## Telemetry overhead');
  });
});

describe('the load warning', () => {
  it('flags a section only when the load average went above the core count', () => {
    expect(loadIsHigh({ min: 0.2, max: 2, cores: 2 })).toBe(false);
    expect(loadIsHigh({ min: 0.2, max: 2.1, cores: 2 })).toBe(true);
  });

  it('names the section and the load, and does not blame other processes alone (the bench makes load too)', () => {
    const text = loadWarning('4. HTTP', { min: 1, max: 2.84, cores: 2 });
    expect(text).toMatch(/^\*\*Warning\*\*: the load average \(1 min\) reached 2\.8 on 2 cores during "4\. HTTP": /);
    expect(text).toContain("from other processes or from the bench's own servers and load generators");
  });
});
