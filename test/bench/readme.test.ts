/** The README's benchmark headline, generated from bench/RESULTS.md (bench/readme.ts). */

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { README_END, README_START, readmeHeadline, withReadmeHeadline } from '../../bench/readme.ts';
import { KEPT_MARKER, loadIsHigh, loadWarning, withKeptPart } from '../../bench/report.ts';

const root = resolve(import.meta.dirname, '../..');

const TARGETS = `# Benchmark results

Written by \`npm run bench\`: full run on Node v26.1.0, started 2026-11-24 03:00 UTC, wall time 420 s.

## Targets (1 of 2 met)

| what | target | measured | from |  |
| --- | --- | --- | --- | --- |
| fastest peer ÷ ours (node:crypto), 1 KiB, valid | ≥ 1 | 1.02 (0.98–1.05) | x | pass |
| a row with a \\| pipe | ≥ 0.9 | 0.80 (0.70–0.90) | x | **MISS** |
`;

const PEERS = `
## 1. Peers, same work

Some text.

| request | candidate | time per call | ÷ ours | ÷ floor |
| --- | --- | --- | --- | --- |
| 1 KiB, valid | ours, node:crypto | 2.58 µs (2.56 µs–2.64 µs) | 1 | 1.57 (1.55–1.58) |
| 1 KiB, valid | ours, WebCrypto | 45.0 µs (44 µs–46 µs) | 17.4 (17–18) | 27 (26–28) |
| 1 KiB, valid | bare HMAC (floor) | 1.66 µs (1.64 µs–1.68 µs) | 0.64 (0.63–0.65) | 1.00 (1.00–1.00) |
| 1 KiB, valid | @octokit/webhooks-methods | 2.60 µs (2.5 µs–2.7 µs) | 1.01 (0.97–1.04) | 1.57 (1.5–1.6) |
| 1 KiB, valid | Stripe constructEvent | 5.2 µs (5.1 µs–5.3 µs) | 2.01 (1.98–2.05) | 3.1 (3–3.2) |
| 1 KiB, valid | standardwebhooks | 15.2 µs (15.1 µs–15.3 µs) | 5.87 (5.80–5.91) | 9.17 (9.11–9.26) |
| 1 MiB, valid | ours, node:crypto | 532 µs (524 µs–538 µs) | 1 | 1.02 (1.02–1.02) |
| 1 MiB, valid | bare HMAC (floor) | 520 µs (515 µs–529 µs) | 0.98 (0.98–0.99) | 1.00 (1.00–1.00) |
| 1 MiB, valid | @octokit/webhooks-methods | 560 µs (550 µs–570 µs) | 1.05 (1.03–1.07) | 1.08 (1.05–1.1) |
| 1 MiB, valid | Stripe constructEvent | 3.7 ms (3.6 ms–3.8 ms) | 6.95 (6.9–7.0) | 7.1 (7–7.2) |
| 1 MiB, valid | standardwebhooks | 9.39 ms (9.31 ms–9.54 ms) | 17.72 (17.61–17.89) | 18.06 (17.94–18.21) |
| 1 KiB, forged | ours, node:crypto | 3.16 µs (3.12 µs–3.22 µs) | 1 | 1.96 (1.95–1.98) |

## 2. Rotation
`;

const STAMP =
  '1 of 2 targets met (full run on Node v26.1.0, 2026-11-24 03:00 UTC); every figure, the machine and the fairness notes are in ' +
  '[bench/RESULTS.md](bench/RESULTS.md), how to read them in [docs/benchmarks.md](docs/benchmarks.md).';

describe('readmeHeadline', () => {
  it('links the peer chart and shows ours, the floor and three peers at 1 KiB and 1 MiB, and the targets met', () => {
    expect(readmeHeadline(TARGETS + PEERS)).toBe(
      [
        "Time per verification of one valid request, each library with its own scheme's headers, measured in one run (ratios over ours taken back to back; lower is faster):",
        '',
        '![Time per call of each library ÷ ours](docs/benchmarks/peers.svg)',
        '',
        '|  | 1 KiB | ÷ ours | 1 MiB | ÷ ours |',
        '| --- | --- | --- | --- | --- |',
        '| **webhook-receiver** | 2.58 µs | 1 | 532 µs | 1 |',
        '| bare HMAC of the same bytes (the floor) | 1.66 µs | 0.64 | 520 µs | 0.98 |',
        '| `@octokit/webhooks-methods` (checks no timestamp, no id) | 2.60 µs | 1.01 | 560 µs | 1.05 |',
        '| Stripe `constructEvent` (parses the JSON too) | 5.2 µs | 2.01 | 3.7 ms | 6.95 |',
        '| `standardwebhooks` (`svix` 2 within a few %) | 15.2 µs | 5.87 | 9.39 ms | 17.72 |',
        '',
        STAMP,
      ].join('\n'),
    );
  });

  it('says plainly when the results hold no peer comparison yet, and still counts the targets', () => {
    expect(readmeHeadline(TARGETS)).toBe(`No peer comparison in bench/RESULTS.md yet: run \`npm run bench\`. ${STAMP}`);
  });

  it('refuses results without a targets table', () => {
    expect(() => readmeHeadline('# Benchmark results\n')).toThrow('bench/RESULTS.md has no "## Targets" table');
  });
});

describe('withReadmeHeadline', () => {
  it('replaces only the text between the markers', () => {
    const readme = `# x\n\nbefore\n${README_START}\nold table\n${README_END}\nafter\n`;
    expect(withReadmeHeadline(readme, TARGETS + PEERS)).toBe(`# x\n\nbefore\n${README_START}\n${readmeHeadline(TARGETS + PEERS)}\n${README_END}\nafter\n`);
  });

  it('refuses a README without the markers', () => {
    expect(() => withReadmeHeadline('# x\n', TARGETS)).toThrow('README.md lacks the markers');
  });

  it('the committed README holds the headline of the committed results, when it has the markers', () => {
    const readme = readFileSync(resolve(root, 'README.md'), 'utf8');
    const results = readFileSync(resolve(root, 'bench/RESULTS.md'), 'utf8');
    expect(readme).toContain(README_START);
    expect(withReadmeHeadline(readme, results)).toBe(readme);
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
