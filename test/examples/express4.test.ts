/**
 * examples/express.ts on Express 4: the example imports `express`, which this file maps to the
 * `express4` alias (Express 4), so the same file a user copies runs on both.
 */

import { generateSecret } from 'webhook-receiver';
import { describe, expect, it, vi } from 'vitest';
import { createApp } from '../../examples/express.ts';
import { expressExampleTests } from './express-suite.ts';

vi.mock('express', async () => await import('express4'));

describe('examples/express.ts on Express 4', () => {
  it('runs on Express 4 here', () => {
    // Express 4 makes its router on first use (lazyrouter); Express 5 has no such method.
    expect(typeof (createApp({ secrets: generateSecret() }) as unknown as { lazyrouter?: unknown }).lazyrouter).toBe('function');
  });

  expressExampleTests();
});
