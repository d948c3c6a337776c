import { createRequire } from 'node:module';
import { generateSecret } from 'webhook-receiver';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../examples/express.ts';
import { expressExampleTests } from './express-suite.ts';
import { scriptTests } from './support.ts';

describe('examples/express.ts on Express 5', () => {
  it('runs on Express 5 here', () => {
    const version = (createRequire(import.meta.url)('express/package.json') as { version: string }).version;
    expect(version).toMatch(/^5\./);
    // Express 5 builds its router up front; Express 4 makes it on first use (lazyrouter).
    expect((createApp({ secrets: generateSecret() }) as unknown as { lazyrouter?: unknown }).lazyrouter).toBeUndefined();
  });

  expressExampleTests();
  scriptTests('express.ts', /^webhook msg_script_1: invoice\.paid \(key 0\)$/m);
});
