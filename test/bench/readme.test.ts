/** The README's benchmark headline, generated from bench/RESULTS.md (bench/readme.ts). */

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { README_END, README_START, readmeHeadline, withReadmeHeadline } from '../../bench/readme.ts';
import { capacityBlock, DOC_BLOCKS, node24Block, receiverSplitBlock, withBlock } from '../../bench/doc-blocks.ts';
import { BARE_MAP, CAPACITY_TITLE, CLAIM, PARTS_HEADING, RECEIVER_ONLY, RECEIVER_TITLE, SCALE_HEADING, STORE_ONLY, TWO_HEADING, USAGE_HEADING } from '../../bench/labels.ts';
import { judged, KEPT_MARKER, loadIsHigh, loadWarning, renderReport, signedFixed, withKeptPart, type SectionReport } from '../../bench/report.ts';

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

  it('says how many of the targets met are ties', () => {
    const withTies = TARGETS.replace('## Targets (1 of 2 met)\n', '## Targets (2 of 3 met)\n\nMet: 1 of them is a tie: the rest of the line.\n');
    expect(readmeHeadline(withTies)).toBe(`No peer comparison in bench/RESULTS.md yet: run \`npm run bench\`. ${STAMP.replace('1 of 2 targets met', '2 of 3 targets met, 1 of them a tie')}`);
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

describe('judging a target', () => {
  it('meets it on the median, calls it a tie when only the range reaches it, and misses it otherwise, either way round', () => {
    expect(judged({ median: 1.1, min: 1.0, max: 1.2 }, '≤', 1.15)).toEqual({ measured: '1.10 (1.00–1.20)', pass: true, tie: false });
    expect(judged({ median: 1.2, min: 1.1, max: 1.3 }, '≤', 1.15)).toEqual({ measured: '1.20 (1.10–1.30): a tie', pass: true, tie: true });
    expect(judged({ median: 1.3, min: 1.2, max: 1.4 }, '≤', 1.15)).toEqual({ measured: '1.30 (1.20–1.40)', pass: false, tie: false });
    expect(judged({ median: 0.95, min: 0.9, max: 1.01 }, '≥', 1)).toEqual({ measured: '0.95 (0.90–1.01): a tie', pass: true, tie: true });
    expect(judged({ median: 0.95, min: 0.9, max: 0.99 }, '≥', 1)).toEqual({ measured: '0.95 (0.90–0.99)', pass: false, tie: false });
  });

  it('the report marks a tie as such, counts it as met, and says how many there are', () => {
    const target = (what: string, s: { median: number; min: number; max: number }) => ({ what, target: '≤ 1.15', context: 'x', ...judged(s, '≤', 1.15) });
    const section: SectionReport = {
      id: 'receiver',
      title: '11. Receiver',
      body: 'text',
      targets: [target('met', { median: 1, min: 1, max: 1 }), target('tied', { median: 1.2, min: 1.1, max: 1.3 }), target('missed', { median: 1.3, min: 1.2, max: 1.4 })],
    };
    const report = renderReport([section], { startedAt: new Date(0), seconds: 1, quick: false, only: 'receiver' });
    expect(report).toContain('## Targets (2 of 3 met)\n\nMet: 1 of them is a tie: ');
    expect(report).toContain('| tied | ≤ 1.15 | 1.20 (1.10–1.30): a tie | x | tie |');
    expect(report).toContain('| missed | ≤ 1.15 | 1.30 (1.20–1.40) | x | **MISS** |');
    expect(readmeHeadline(report)).toContain('2 of 3 targets met, 1 of them a tie');
  });
});

describe('a difference with its sign (the profiles\' difference columns)', () => {
  it('signs what rounds away from zero, and prints zero for what rounds to it, never -0', () => {
    expect(signedFixed(0.25)).toBe('+0.25');
    expect(signedFixed(-0.25)).toBe('-0.25');
    expect(signedFixed(-0.004)).toBe('0.00');
    expect(signedFixed(0.004)).toBe('0.00');
    expect(signedFixed(0.05, 1)).toBe('+0.1');
    expect(signedFixed(-0.04, 1)).toBe('0.0');
    expect(signedFixed(1617.4, 0)).toBe('+1617');
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

describe("the guides' generated blocks (bench/doc-blocks.ts)", () => {
  const node24 = `${TARGETS}
## 1. Peers, same work

### On each Node line

Text.

| Node | request | candidate | time per call | ÷ ours | ÷ floor |
| --- | --- | --- | --- | --- | --- |
| v22.23.3 | 1 KiB, valid | ours, node:crypto | 2.20 µs | 1 | 1.40 |
| v24.21.0 | 1 KiB, valid | ours, node:crypto | 2.50 µs | 1 | 1.40 |
| v24.21.0 | 1 KiB, valid | ours, WebCrypto | 60.0 µs | 24.00 | 33.00 |
| v24.21.0 | 1 KiB, valid | hand-written check | 2.60 µs | 1.04 | 1.45 |
| v24.21.0 | 1 KiB, valid | hand-written check, Buffer key | 10.0 µs | 4.00 | 5.60 |
| v24.21.0 | 1 KiB, valid | bare HMAC (floor) | 1.80 µs | 0.72 | 1.00 |

## 2. Rotation
`;

  it('the Node 24 block says what keying with a KeyObject gains there, from the Node 24 rows only', () => {
    expect(node24Block(node24)).toBe(
      [
        'On Node v24.21.0, one valid 1 KiB request: ours 2.50 µs, the hand-written check keyed with a `KeyObject` 2.60 µs (1.04 of ours), ' +
          "the same check keyed with the secret's bytes 10.0 µs (4.00 of ours). The check keyed with a Buffer takes 4.0 times as long as " +
          "this package's verification: that is what an app on Node 24 that keys `createHmac` with the bytes gains by moving to this " +
          'package, which imports each secret once as a `KeyObject`. From bench/RESULTS.md (full run on Node v26.1.0, 2026-11-24 03:00 UTC):',
        '',
        '| request | candidate | time per call | ÷ ours | ÷ floor |',
        '| --- | --- | --- | --- | --- |',
        '| 1 KiB, valid | ours, node:crypto | 2.50 µs | 1 | 1.40 |',
        '| 1 KiB, valid | hand-written check | 2.60 µs | 1.04 | 1.45 |',
        '| 1 KiB, valid | hand-written check, Buffer key | 10.0 µs | 4.00 | 5.60 |',
        '| 1 KiB, valid | bare HMAC (floor) | 1.80 µs | 0.72 | 1.00 |',
      ].join('\n'),
    );
  });

  const usageSection = `
${USAGE_HEADING}

Text.

| process | WCU |
| --- | --- |
| both | 4.00 |
`;
  const capacity = `${TARGETS}
## ${CAPACITY_TITLE}

Text.

${PARTS_HEADING}

| shape | receiver | Redis |
| --- | --- | --- |
| Redis store | 30.0 µs | 10.0 µs |
| DynamoDB store + SQS inbox | 200 µs | – |

Text.
${usageSection}
${TWO_HEADING}

Text.

| shape | req/s, both receivers |
| --- | --- |
| Redis store | 20,000 |

${SCALE_HEADING}

| shape | 1 receiver |
| --- | --- |
| Redis store | 33,333 |

_Section wall time: 30.0 s (budget 90 s); load average (1 min) 0.1–0.9 on 2 cores._
`;

  it('the capacity block copies section 16 tables, with their charts and where they came from', () => {
    const block = capacityBlock(capacity);
    expect(block).toMatch(/^Measured on one machine, from bench\/RESULTS\.md \(full run on Node v26\.1\.0, 2026-11-24 03:00 UTC\)\. CPU time per delivery, by process:\n/);
    expect(block).toContain('| Redis store | 30.0 µs | 10.0 µs |\n| DynamoDB store + SQS inbox | 200 µs | – |\n');
    // The AWS shape's write units and requests, where the run measured them.
    expect(block).toContain('DynamoDB bills write units, SQS requests):\n\n| process | WCU |\n| --- | --- |\n| both | 4.00 |\n');
    expect(capacityBlock(capacity.replace(usageSection, ''))).not.toContain('| process | WCU |');
    expect(block).toContain('| Redis store | 20,000 |');
    expect(block).toContain('| Redis store | 33,333 |');
    expect(block).toContain('![CPU time per delivery, by process](benchmarks/capacity-parts.svg)');
    expect(block).not.toContain('loaded');
    // A section run under load says so in the guide too.
    expect(capacityBlock(capacity.replace('_Section wall time', '**Warning**: the load average (1 min) reached 4.0\n\n_Section wall time'))).toContain('the machine was loaded during this run');
  });

  it("the receiver split block copies section 11's floor, claim + complete and its two parts, and nothing else", () => {
    const section = [
      `## ${RECEIVER_TITLE}`,
      '',
      'Some text.',
      '',
      '| candidate | time per call | ÷ verify alone | ÷ verify + a bare Map |',
      '| --- | --- | --- | --- |',
      '| verify alone | 3.50 µs (3.40 µs–3.60 µs) | 1 | 0.66 (0.62–0.67) |',
      `| ${CLAIM} | 6.60 µs (6.50 µs–6.90 µs) | 1.89 (1.80–1.96) | 1.26 (1.22–1.30) |`,
      `| ${BARE_MAP} | 5.20 µs (5.10 µs–5.40 µs) | 1.49 (1.41–1.53) | 1 |`,
      `| ${RECEIVER_ONLY} | 5.60 µs (5.40 µs–5.80 µs) | 1.60 (1.52–1.66) | 1.07 (1.06–1.08) |`,
      `| ${STORE_ONLY} | 5.80 µs (5.70 µs–6.10 µs) | 1.66 (1.59–1.68) | 1.10 (1.08–1.17) |`,
      '| handle, a handler that does nothing | 7.00 µs (6.80 µs–7.50 µs) | 2.00 (1.90–2.14) | 1.35 (1.28–1.43) |',
      '',
      '## 12. Tenant keys',
      '',
      '| a | b |',
      '| --- | --- |',
      '| x | y |',
      '',
    ].join('\n');
    expect(receiverSplitBlock(TARGETS + section)).toBe(
      [
        'From bench/RESULTS.md (full run on Node v26.1.0, 2026-11-24 03:00 UTC), section 11 (time per delivery: median, min–max; each ratio taken within a repetition):',
        '',
        '| what | time per delivery | ÷ the floor |',
        '| --- | --- | --- |',
        '| the floor: a verification + a bare bounded `Map` | 5.20 µs (5.10 µs–5.40 µs) | 1 |',
        '| claim + complete (the target: ≤ 1.15 of the floor) | 6.60 µs (6.50 µs–6.90 µs) | 1.26 (1.22–1.30) |',
        "| the receiver's claim protocol, the bare `Map` as its store | 5.60 µs (5.40 µs–5.80 µs) | 1.07 (1.06–1.08) |",
        '| the memory store alone, after a verification | 5.80 µs (5.70 µs–6.10 µs) | 1.10 (1.08–1.17) |',
      ].join('\n'),
    );
    // A results file whose section 11 lacks one of the rows (an older run) gets no block of guesses.
    expect(receiverSplitBlock(TARGETS + section.replace(`| ${STORE_ONLY} |`, '| something else |'))).toMatch(/^Not measured yet: /);
  });

  it('says "not measured yet" where the results hold no figure, and invents none', () => {
    for (const render of [node24Block, capacityBlock, receiverSplitBlock]) {
      const text = render(TARGETS + PEERS);
      expect(text).toMatch(/^Not measured yet: /);
      expect(text).not.toMatch(/\d µs/);
    }
    // Node 22's rows alone are not Node 24's.
    expect(node24Block(node24.replaceAll('v24.21.0', 'v22.23.3'))).toMatch(/^Not measured yet: /);
  });

  it('replaces only the text between its markers, and refuses a file without them', () => {
    const block = DOC_BLOCKS.find((each) => each.render === capacityBlock)!;
    const text = `# x\n\nbefore\n${block.start}\nold\n${block.end}\nafter\n`;
    expect(withBlock(text, block, capacity)).toBe(`# x\n\nbefore\n${block.start}\n${capacityBlock(capacity)}\n${block.end}\nafter\n`);
    expect(() => withBlock('# x\n', block, capacity)).toThrow(`${block.file} lacks the markers`);
  });

  it('the committed guides hold the blocks of the committed results', () => {
    const results = readFileSync(resolve(root, 'bench/RESULTS.md'), 'utf8');
    for (const block of DOC_BLOCKS) {
      const text = readFileSync(resolve(root, block.file), 'utf8');
      expect(text).toContain(block.start);
      expect(withBlock(text, block, results)).toBe(text);
    }
  });
});
