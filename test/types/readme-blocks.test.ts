/**
 * The TypeScript blocks of README.md and of every guide in docs/ compile as written, so a reader
 * can copy any of them as it stands: each ```ts block becomes a module of its own, type-checked by
 * the TypeScript compiler API under this repository's strict settings (tsconfig.json,
 * `module: nodenext`), with `webhook-receiver/*` resolved to the source entries
 * through tsconfig.json's `paths`. A block indented inside a list item counts too.
 *
 * The only names filled in are the app's own things a snippet takes for granted (its secret, the
 * incoming request, its database, its Express app), declared in one global prelude below; a block
 * that declares the same name shadows it. Nothing of the package, or of a library a block uses,
 * is filled in: a block that forgets an import fails.
 */
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { codeBlocks, guideFiles, readDoc, root, type CodeBlock as Block } from '../support/docs.ts';

const documents = new Map(guideFiles().map((file) => [file, readDoc(file)] as const));

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
declare const db: { transaction<T>(fn: (tx: import('pg').PoolClient) => Promise<T>): Promise<T> };
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
/** The Express app under test with supertest. */
declare const expressApp: import('express').Express;
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
  mysqlStore: "a store of the user's own (../src/mysql-store.js) over mysql2, which this repository does not install",
  mongoStore: "a store of the user's own (../src/mongo-store.js) over the mongodb driver, which this repository does not install",
  claimsTable: 'the DynamoDB table in the AWS CDK (aws-cdk-lib, a framework of its own), which this repository does not install',
};

/** Blocks that are test files: checked with vitest's globals and the matchers' types, as the recipe configures them. */
const testFileFragments = ['toBeSignedWebhook', 'toConformToStandardWebhooks', 'expect(response.status)', 'waitForDeliveries'];

const blocks = [...documents].flatMap(([file, text]) => codeBlocks(text, file));
const isSkipped = (block: Block) => Object.keys(skipped).some((fragment) => block.code.includes(fragment));
const checked = blocks.filter((block) => !isSkipped(block));
const isTestFile = (block: Block) => testFileFragments.some((fragment) => block.code.includes(fragment));

// Virtual files inside the repository, so node_modules, package.json's "type" and tsconfig.json's
// paths resolve as they do for the repository's own files. Nothing is written to disk.
const virtualDir = join(root, 'test/types/readme-blocks');
const fileOf = (block: Block) => join(virtualDir, `${block.file.replace(/[/.]/g, '-')}-line-${block.line}.ts`);
const preludeFile = join(virtualDir, 'placeholders.d.ts');

function sourceText(block: Block): string {
  const extras = Object.entries(extraPlaceholders).filter(([fragment]) => block.code.includes(fragment)).map(([, text]) => text);
  // `export {}` keeps a block without imports a module, as it is in the user's project.
  return `${block.code}\n${extras.join('\n')}\nexport {};\n`;
}

/** Type-checks the blocks as one program; returns each diagnostic as `<file>.md:<line>: TS<code> <message>`. */
function typeCheck(selected: Block[], testFiles: boolean): string[] {
  const parsed = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.json'), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
  });
  if (!parsed) throw new Error('tsconfig.json did not parse');
  const options: ts.CompilerOptions = {
    ...parsed.options,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    noEmit: true,
    // A test file sees vitest's globals and the matchers' types, as the README's recipe sets them up.
    types: testFiles ? ['node', 'vitest/globals'] : ['node'],
  };
  const virtual = new Map<string, string>([[preludeFile, prelude], ...selected.map((block) => [fileOf(block), sourceText(block)] as const)]);
  const host = ts.createCompilerHost(options, true);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (name) => virtual.has(name) || fileExists.call(host, name);
  host.readFile = (name) => virtual.get(name) ?? readFile.call(host, name);
  host.getSourceFile = (name, language, onError, create) => {
    const text = virtual.get(name);
    return text === undefined ? getSourceFile.call(host, name, language, onError, create) : ts.createSourceFile(name, text, language, true);
  };
  host.directoryExists = (name) => name === virtualDir || ts.sys.directoryExists(name);
  // The vitest entry's augmentation, as `"types": ["webhook-receiver/vitest"]` brings it into a user's project.
  const rootNames = [...virtual.keys(), ...(testFiles ? [join(root, 'src/testing/vitest.ts')] : [])];
  const program = ts.createProgram({ rootNames, options, host });
  const blockOf = new Map(selected.map((block) => [fileOf(block), block]));
  const diagnostics = [...program.getGlobalDiagnostics(), ...program.getOptionsDiagnostics()].map(
    (d) => `TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`,
  );
  for (const name of virtual.keys()) {
    const file = program.getSourceFile(name);
    if (!file) throw new Error(`${name} is not in the program`);
    for (const d of [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]) {
      const { line } = file.getLineAndCharacterOfPosition(d.start ?? 0);
      const block = blockOf.get(name);
      const where = block === undefined ? `placeholders:${line + 1}` : `${block.file}:${block.line + line}`;
      diagnostics.push(`${where}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    }
  }
  return diagnostics;
}

// The compiler over the adapters' frameworks takes a while on a loaded two-core machine.
describe("the TypeScript blocks of the README and the guides", { timeout: 300_000 }, () => {
  it('finds the blocks, and each skipped one is named with its reason', () => {
    for (const fragment of Object.keys(skipped)) expect(blocks.filter((block) => block.code.includes(fragment)), fragment).toHaveLength(1);
    for (const fragment of Object.keys(extraPlaceholders)) expect(checked.filter((block) => block.code.includes(fragment)), fragment).toHaveLength(1);
    expect(checked.length).toBeGreaterThanOrEqual(30);
    for (const file of ['README.md', 'docs/express.md', 'docs/nestjs.md', 'docs/idempotency.md']) expect(checked.some((block) => block.file === file), file).toBe(true);
    console.log(`${documents.size} files: ${blocks.length} ts blocks, ${checked.length} type-checked, ${blocks.length - checked.length} skipped (${Object.keys(skipped).join(', ')})`);
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
    const block = checked.find((b) => b.code.includes("from 'webhook-receiver/express'") && b.code.includes('webhook.json<'));
    if (!block) throw new Error('no Express block');
    const broken = { ...block, code: block.code.replace('webhook.json<', 'webhook.jsn<') };
    expect(broken.code).not.toBe(block.code);
    const errors = typeCheck([broken], false);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(new RegExp(`^${block.file.replace('.', '\\.')}:\\d+: TS2551 Property 'jsn' does not exist on type 'VerifiedWebhook'`));
  });

  it("imports ioredis by name: the default import is not constructable under nodenext", () => {
    const block = checked.find((b) => b.code.includes("import { Redis } from 'ioredis'"));
    if (!block) throw new Error("no block imports { Redis } from 'ioredis'");
    for (const [file, text] of documents) expect(text, file).not.toMatch(/import Redis from 'ioredis'/);
    const errors = typeCheck([{ ...block, code: block.code.replace("import { Redis } from 'ioredis'", "import Redis from 'ioredis'") }], false);
    const where = errors.map((error) => error.replace(/^(\S+:\d+: TS\d+).*$/, '$1'));
    expect(where[0]).toBe(`${block.file}:${block.line + block.code.split('\n').findIndex((l) => l.includes('new Redis('))}: TS2351`);
    // What follows from it: the error listener's parameter is no longer typed by the client.
    expect(where.slice(1).every((error) => error.endsWith('TS7006'))).toBe(true);
  });

  // With Redis down, an ioredis client without an 'error' listener floods the
  // log with "Unhandled error event", and a node-redis one throws. Every snippet that makes a
  // client shows the listener, one per client made.
  it("shows an 'error' listener on every Redis client a block makes", () => {
    const makers = [
      { library: "from 'ioredis'", makes: /new Redis\(/g },
      { library: "from 'redis'", makes: /createClient\(/g },
    ];
    const missing = blocks.flatMap((block) =>
      makers
        .filter(({ library }) => block.code.includes(library))
        .filter(({ makes }) => (block.code.match(makes) ?? []).length > (block.code.match(/\.on\('error',/g) ?? []).length)
        .map(({ library }) => `${block.file}:${block.line} (${library})`),
    );
    expect(blocks.filter((block) => /new Redis\(|createClient\(/.test(block.code)).length).toBeGreaterThanOrEqual(2);
    expect(missing).toEqual([]);
  });
});
