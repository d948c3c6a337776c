/**
 * The NestJS quick start in docs/nestjs.md, run exactly as written under tsx:
 * tsx (esbuild) emits no decorator metadata, so a constructor parameter injected by type is
 * `undefined` there and every delivery fails with 500. The quick start injects by explicit token;
 * the same block without that token is run too, and fails, so this test would catch a snippet that
 * went back to injection by type. The block is type-checked with the others
 * (test/types/readme-blocks.test.ts).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSecret, signWebhook } from 'webhook-receiver';
import { afterAll, describe, expect, it } from 'vitest';
import { codeBlocks, readDoc } from '../support/docs.ts';
import { root, startServer } from '../runtimes/harness.ts';
import { BODY, envelope, post } from './support.ts';

const blocks = codeBlocks(readDoc('docs/nestjs.md'), 'docs/nestjs.md').filter((block) => block.code.includes('NestFactory.create'));
const INJECT = '@Inject(OrdersService) ';

// Inside the repository (git-ignored), so the block's imports resolve as an app's would: the
// frameworks from node_modules, 'webhook-receiver/nestjs' through tsconfig.json's paths. Its own
// tsconfig.json extends the repository's (experimentalDecorators, as the guide asks; tsx applies a
// tsconfig only to the files it includes).
const dir = join(root, '.tmp', `nestjs-guide-${process.pid}`);
const tsx = join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs');

async function startBlock(name: string, code: string, secret: string) {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.ts`);
  writeFileSync(file, code);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ extends: '../../tsconfig.json', include: ['*.ts'] }));
  return startServer(process.execPath, [tsx, '--tsconfig', join(dir, 'tsconfig.json'), file], { cwd: root, env: { WEBHOOK_SECRET: secret, PORT: '0' }, timeoutMs: 30_000 });
}

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the NestJS quick start (docs/nestjs.md) under tsx', { timeout: 60_000 }, () => {
  it('is one block, and it injects OrdersService by explicit token', () => {
    expect(blocks).toHaveLength(1);
    expect(blocks[0]!.code).toContain(`constructor(${INJECT}private readonly orders: OrdersService)`);
  });

  it('runs as written: processes a signed delivery once, answers its retry as a duplicate, refuses a tampered one', async () => {
    const secret = generateSecret();
    const app = await startBlock('main', blocks[0]!.code, secret);
    try {
      const signed = await signWebhook({ secret, body: BODY, id: 'msg_guide_1' });
      expect(await post(app.url, signed.headers)).toEqual({ status: 200, body: { received: true } });
      expect(await post(app.url, signed.headers)).toEqual({ status: 200, body: { duplicate: true } });
      expect(await post(app.url, signed.headers, BODY.replace('paid', 'void'))).toEqual({ status: 401, body: envelope('SIGNATURE_MISMATCH', /^no signature matched/) });
      expect(app.output()).not.toContain(secret);
    } finally {
      await app.stop();
    }
  });

  it('without the explicit token, injection by type fails under tsx: every delivery is answered 500', async () => {
    const secret = generateSecret();
    const app = await startBlock('by-type', blocks[0]!.code.replace(INJECT, ''), secret);
    try {
      const signed = await signWebhook({ secret, body: BODY, id: 'msg_guide_2' });
      expect((await post(app.url, signed.headers)).status).toBe(500);
    } finally {
      await app.stop();
    }
  });
});
