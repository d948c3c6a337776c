/**
 * docs/errors.md holds the full error table: every code of `WEBHOOK_ERROR_STATUS` with
 * its status, and no code the package does not have.
 */
import { describe, expect, it } from 'vitest';
import { WEBHOOK_ERROR_STATUS } from '../../src/index.ts';
import { readDoc } from '../support/docs.ts';

describe('docs/errors.md', () => {
  it('lists every error code with its status, and nothing else', () => {
    const page = readDoc('docs/errors.md');
    const rows = [...page.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \|/gm)].map((match) => [match[1], Number(match[2])]);
    expect(Object.fromEntries(rows)).toEqual(WEBHOOK_ERROR_STATUS);
    expect(rows).toHaveLength(Object.keys(WEBHOOK_ERROR_STATUS).length);
  });
});
