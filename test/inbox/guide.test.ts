/**
 * The inbox guide's TypeScript blocks (docs/inbox.md) compile as written, each on its own: every
 * block imports and declares what it uses, so a reader can copy any one of them.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, tsBlocks, typeCheckBlocks } from '../support/ts-blocks.ts';

const guide = readFileSync(join(root, 'docs/inbox.md'), 'utf8');
const blocks = tsBlocks(guide);

describe("the inbox guide's TypeScript blocks", { timeout: 300_000 }, () => {
  it('compile as written, each self-contained', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    expect(typeCheckBlocks(blocks, { document: 'docs/inbox.md' })).toEqual([]);
  });

  it('fails on a block with a type error', () => {
    const block = blocks.find((b) => b.code.includes('inbox.deadLetters()'));
    if (!block) throw new Error('no dead-letter block');
    const errors = typeCheckBlocks([{ line: block.line, code: block.code.replace('letter.attempts', 'letter.attempt') }], { document: 'docs/inbox.md' });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^docs\/inbox\.md:\d+: TS2551 Property 'attempt' does not exist on type 'DeadLetter'/);
  });
});
