/**
 * The README's TypeScript blocks compile as written (issue 14, "One typing story across
 * adapters"): each ```ts block becomes a module of its own, type-checked by the TypeScript
 * compiler API under this repository's strict settings (tsconfig.json, `module: nodenext`), with
 * `webhook-receiver/*` resolved to the source entries through tsconfig.json's `paths`.
 *
 * The only names filled in are the app's own things a snippet takes for granted (its secret, the
 * incoming request, its database, its Express app), declared in one global prelude below; a block
 * that declares the same name shadows it. Nothing of the package, or of a library a block uses,
 * is filled in: a block that forgets an import fails.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, tsBlocks, typeCheckBlocks, type Block } from '../support/ts-blocks.ts';

const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** The app's own things, never the package's or a library's API. */
const prelude = `
declare const secrets: string;
declare const destinationSecret: string;
declare const current: string;
declare const previous: string;
/** The incoming request, as the app's framework hands it over. */
declare const request: Request;
declare const req: import('node:http').IncomingMessage;
declare const rawBody: Uint8Array;
declare const input: { headers: Record<string, string>; body: string };
/** The app's business logic and its dependencies. */
declare const orders: { markPaid(orderId: string): Promise<void> };
/** The NestJS app's own provider. */
declare class OrdersService { apply(event: unknown, options: { signal: AbortSignal }): Promise<void> }
declare function handle(event: unknown, options?: { signal: AbortSignal }): Promise<void>;
declare function processEvent(event: unknown): Promise<void>;
declare const metrics: { increment(name: string, attributes: Record<string, string | number | undefined>): void };
declare const events: unknown[];
type Paid = { orderId: string };
/** Made by an earlier block of the same section (the Postgres store and its receiver). */
declare const receiver: import('webhook-receiver').Receiver;
declare const store: import('webhook-receiver/postgres').PostgresStore<import('pg').PoolClient>;
/** The app under test in the testing blocks, and what the relay under test forwarded. */
declare const app: import('hono').Hono;
declare const relay: { replay(event: unknown, url: string): Promise<void> };
declare const event: unknown;
declare const captured: Request;
declare const capturedUnattemptedEvent: Request;
declare const forwarded: Request;
declare const unattempted: Request;
declare const tampered: Request;
/** The Worker's bindings, as \`wrangler types\` generates them. */
interface Env {
  WEBHOOK_SECRET: string;
  WEBHOOK_CLAIMS: import('webhook-receiver/cloudflare').DurableObjectNamespaceLike;
}
`;

/**
 * Per-block placeholders, appended after the block (so its line numbers stay the README's), for a
 * name the shared prelude gives another type. Keyed by a fragment of the block.
 */
const extraPlaceholders: Record<string, string> = {
  // The readiness check is shown on an Express app.
  "app.get('/ready'": "declare const app: import('express').Express;",
};

/**
 * Blocks left unchecked, each with its reason. Every entry must match exactly one block, so the
 * list cannot outlive the block it excuses.
 */
const skipped: Record<string, string> = {
  dynamoStore: "a store of the user's own (../src/dynamo-store.js) over @aws-sdk/client-dynamodb, which this repository does not install",
  mongoStore: "a store of the user's own (../src/mongo-store.js) over the mongodb driver, which this repository does not install",
};

/** Blocks that are test files: checked with vitest's globals and the matchers' types, as the recipe configures them. */
const testFileFragments = ['toBeSignedWebhook', 'toConformToStandardWebhooks', 'expect(response.status)', 'waitForDeliveries'];

const blocks = tsBlocks(readme);
const isSkipped = (block: Block) => Object.keys(skipped).some((fragment) => block.code.includes(fragment));
const checked = blocks.filter((block) => !isSkipped(block));
const isTestFile = (block: Block) => testFileFragments.some((fragment) => block.code.includes(fragment));

/** Type-checks the blocks as one program; returns each diagnostic as `README.md:<line>: TS<code> <message>`. */
function typeCheck(selected: Block[], testFiles: boolean): string[] {
  return typeCheckBlocks(selected, {
    document: 'README.md',
    prelude,
    suffixOf: (block) =>
      Object.entries(extraPlaceholders)
        .filter(([fragment]) => block.code.includes(fragment))
        .map(([, text]) => text)
        .join('\n'),
    // A test file sees vitest's globals and the matchers' types, as the README's recipe sets them up,
    // and the vitest entry's augmentation, as `"types": ["webhook-receiver/vitest"]` brings it in.
    types: testFiles ? ['node', 'vitest/globals'] : ['node'],
    extraRoots: testFiles ? [join(root, 'src/testing/vitest.ts')] : [],
  });
}

// The compiler over the adapters' frameworks takes a while on a loaded two-core machine.
describe("the README's TypeScript blocks", { timeout: 300_000 }, () => {
  it('finds the blocks, and each skipped one is named with its reason', () => {
    for (const fragment of Object.keys(skipped)) expect(blocks.filter((block) => block.code.includes(fragment)), fragment).toHaveLength(1);
    for (const fragment of Object.keys(extraPlaceholders)) expect(checked.filter((block) => block.code.includes(fragment)), fragment).toHaveLength(1);
    expect(checked.length).toBeGreaterThanOrEqual(24);
    console.log(`README.md: ${blocks.length} ts blocks, ${checked.length} type-checked, ${blocks.length - checked.length} skipped (${Object.keys(skipped).join(', ')})`);
  });

  it('compile as written: the app blocks', () => {
    expect(typeCheck(checked.filter((block) => !isTestFile(block)), false)).toEqual([]);
  });

  it('compile as written: the test-file blocks (vitest globals and the matchers)', () => {
    const tests = checked.filter(isTestFile);
    expect(tests.length).toBeGreaterThanOrEqual(4);
    expect(typeCheck(tests, true)).toEqual([]);
  });

  it('fails on a block with a type error', () => {
    const block = checked.find((b) => b.code.includes("from 'webhook-receiver/express'"));
    if (!block) throw new Error('no Express block');
    const broken = { line: block.line, code: block.code.replace('webhook.json<', 'webhook.jsn<') };
    expect(broken.code).not.toBe(block.code);
    const errors = typeCheck([broken], false);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^README\.md:\d+: TS2551 Property 'jsn' does not exist on type 'VerifiedWebhook'/);
  });

  it("imports ioredis by name: the default import is not constructable under nodenext", () => {
    const block = checked.find((b) => b.code.includes("import { Redis } from 'ioredis'"));
    if (!block) throw new Error("no block imports { Redis } from 'ioredis'");
    expect(readme).not.toMatch(/import Redis from 'ioredis'/);
    const errors = typeCheck([{ line: block.line, code: block.code.replace("import { Redis } from 'ioredis'", "import Redis from 'ioredis'") }], false);
    expect(errors.map((error) => error.replace(/^(README\.md:\d+: TS\d+).*$/, '$1'))).toEqual([`README.md:${block.line + block.code.split('\n').findIndex((l) => l.includes('new Redis('))}: TS2351`]);
  });
});
