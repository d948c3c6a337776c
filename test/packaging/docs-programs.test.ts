/**
 * What a newcomer does with the guides: installs the packed package into a fresh app and runs the
 * README's quick start and every complete program of the guides as written, each block marked
 * `<!-- run: … -->` (test/support/docs.ts) saved as a file of its own and started with tsx, with
 * the URLs and the secret in the environment, against real servers started here (a private
 * redis-server and PostgreSQL, dynalite for DynamoDB).
 *
 * - `server`: listens (a preloaded shim turns the guide's fixed port into a free one and reports
 *   it), answers a signed delivery 2xx and its duplicate `{"duplicate":true}`.
 * - `program`: its top-level code finishes without an error (it is ready), and it is then stopped.
 * - `script`: exits 0 by itself.
 * - `lifecycle`: handles SIGTERM: once ready it gets one SIGTERM and must end by itself within the
 *   timeout its marker states (the program's own) plus a margin for a loaded machine.
 *
 * A block marked `fails="…"` is known not to run as written: its test passes only while it still
 * fails, so the mark goes when the guide is fixed. Programs that need a cloud (Lambda, Workers,
 * Next.js) are type-checked as written instead (test/types/readme-blocks.test.ts). Every child is
 * stopped by its pid. Runs after `npm run build` (the test command builds first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSecret, signWebhook } from '../../src/sign.ts';
import { relayEmulator, type RelayEmulator } from '../../src/testing/index.ts';
import { codeBlocks, guideFiles, readDoc, type CodeBlock, type RunMarker } from '../support/docs.ts';
import { startDynalite, type Dynalite } from '../support/dynamodb.ts';
import { findPostgresBin, startPostgresServer, type PostgresServer } from '../support/postgres-server.ts';
import { findRedisServer, isCI, startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { consumerProject, pinned } from './support.ts';

type Marked = CodeBlock & { run: RunMarker };

const marked: Marked[] = guideFiles().flatMap((file) => codeBlocks(readDoc(file), file).filter((block): block is Marked => block.run !== undefined));

/** Printed on stderr by the runner: the program's top-level code finished, and a server's port. */
const READY = '\nDOCS-RUN ready\n';
const LISTENING = /\nDOCS-RUN listening (\d+)\n/;

/**
 * The runner each program is started through: it loads the program as its entry module and says
 * when that finished. `listen` on a fixed port (the guides' 3000) gets a free one instead, so runs
 * never collide with anything on the machine; the bound port is reported.
 */
const RUNNER = `import net from 'node:net';
import { pathToFileURL } from 'node:url';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\\d+$/.test(args[0]))) args[0] = 0;
  else if (typeof args[0] === 'object' && args[0] !== null && 'port' in args[0]) args[0] = { ...args[0], port: 0 };
  this.once('listening', () => process.stderr.write(\`\\nDOCS-RUN listening \${this.address().port}\\n\`));
  return listen.apply(this, args);
};
await import(pathToFileURL(process.argv[2]).href);
process.stderr.write('\\nDOCS-RUN ready\\n');
`;

/** What a SIGTERMed program may take beyond its own timeout on a loaded two-core machine. */
const EXIT_MARGIN_MS = 20_000;

/** Why a server this file needs cannot run here, or `undefined`. Under CI a missing one is a failure. */
function missing(need: string): string | undefined {
  const reason =
    need === 'redis' && findRedisServer() === undefined ? 'redis-server is not on the PATH'
    : need === 'postgres' && findPostgresBin() === undefined ? 'initdb and pg_ctl are missing'
    : undefined;
  if (reason !== undefined && isCI()) throw new Error(`${reason}; CI is set, so the guides' programs may not be skipped`);
  return reason;
}

let project: string;
let redis: RedisServer | undefined;
let postgres: PostgresServer | undefined;
let dynamo: Dynalite | undefined;
/** The relay's API for the guides' pull programs: the package's emulator, one event on one trigger. */
let relay: { emulator: RelayEmulator; triggerId: string } | undefined;
const secret = generateSecret();
const children = new Set<ChildProcess>();

beforeAll(async () => {
  const needs = new Set(marked.flatMap((block) => block.run.needs));
  if (needs.has('redis') && missing('redis') === undefined) redis = await startRedisServer();
  if (needs.has('postgres') && missing('postgres') === undefined) postgres = await startPostgresServer();
  if (needs.has('dynamodb')) dynamo = await startDynalite();
  if (needs.has('relay')) {
    const emulator = await relayEmulator();
    emulator.addEvent({ body: '{"type":"invoice.paid"}' });
    relay = { emulator, triggerId: emulator.addTrigger() };
  }
  // What the guides tell a user to install beside the package, at the versions tested here, and
  // tsx to run TypeScript as the README does.
  project = consumerProject(
    ['express', 'koa', '@koa/router', 'bullmq', 'ioredis', 'pg', 'pg-boss', 'pino', '@opentelemetry/api', '@aws-sdk/client-dynamodb', 'tsx'].map(pinned),
  );
  // ES modules, as the guides' top-level awaits need.
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, version: '1.0.0', type: 'module' }));
  writeFileSync(join(project, 'docs-run.mjs'), RUNNER);
}, 600_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await dynamo?.close();
  await relay?.emulator.close();
  await postgres?.close();
  await redis?.close();
  if (project) rmSync(project, { recursive: true, force: true });
}, 120_000);

interface Started {
  child: ChildProcess;
  output(): string;
  /** Resolves once the program is ready (with a server's port); rejects if it exits first. */
  ready: Promise<number | undefined>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function start(block: Marked): Started {
  const file = `${block.file.replace(/[^a-z0-9]+/gi, '-')}-${block.line}.ts`;
  writeFileSync(join(project, file), block.code);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    WEBHOOK_SECRET: secret,
    ...(redis ? { REDIS_URL: redis.url } : {}),
    ...(postgres ? { DATABASE_URL: postgres.url } : {}),
    // The environment docs/dynamodb.md gives for a local endpoint.
    ...(relay ? { RELAY_URL: relay.emulator.url, RELAY_API_KEY: relay.emulator.apiKey, RELAY_TRIGGER_ID: relay.triggerId } : {}),
    ...(dynamo ? { AWS_REGION: 'local', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'x', AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint } : {}),
  };
  const child = spawn(process.execPath, ['--import', 'tsx', 'docs-run.mjs', `./${file}`], { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = once(child, 'exit').then(([code, signal]) => {
    children.delete(child);
    return { code: code as number | null, signal: signal as NodeJS.Signals | null };
  });
  const ready = new Promise<number | undefined>((resolve, reject) => {
    const check = () => {
      if (!output.includes(READY)) return;
      const port = LISTENING.exec(output)?.[1];
      // A server is ready once it listens, which may come after the top-level code finished.
      if (block.code.includes('.listen(') && port === undefined) return;
      child.stdout!.off('data', check);
      child.stderr!.off('data', check);
      resolve(port === undefined ? undefined : Number(port));
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    void exited.then(({ code, signal }) => reject(new Error(`${block.file}:${block.line} exited (code ${code}, signal ${signal}) before it was ready:\n${output}`)));
  });
  ready.catch(() => {});
  return { child, output: () => output, ready, exited };
}

/** Stops a leftover child by its pid and waits for it. */
async function stop(started: Started): Promise<void> {
  if (started.child.exitCode !== null || started.child.signalCode !== null) return;
  started.child.kill('SIGKILL');
  await started.exited;
}

async function post(port: number, body: string, headers: Record<string, string>) {
  const response = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  return { status: response.status, body: text };
}

async function exercise(block: Marked): Promise<void> {
  const where = `${block.file}:${block.line}`;
  const started = start(block);
  try {
    const port = await started.ready;
    switch (block.run.kind) {
      case 'server': {
        expect(port, `${where} did not listen`).toBeTypeOf('number');
        const body = JSON.stringify({ type: 'invoice.paid', data: { id: 'in_1' } });
        const signed = await signWebhook({ secret, body });
        const first = await post(port!, body, signed.headers);
        expect(first.status, `${where}: ${first.body}\n${started.output()}`).toBeGreaterThanOrEqual(200);
        expect(first.status).toBeLessThan(300);
        expect(await post(port!, body, signed.headers)).toEqual({ status: 200, body: '{"duplicate":true}' });
        const forged = await signWebhook({ secret: generateSecret(), body });
        expect((await post(port!, body, forged.headers)).status).toBe(401);
        started.child.kill('SIGTERM');
        await started.exited;
        break;
      }
      case 'program': {
        started.child.kill('SIGTERM');
        await started.exited;
        break;
      }
      case 'script': {
        expect(await started.exited, `${where}:\n${started.output()}`).toEqual({ code: 0, signal: null });
        break;
      }
      case 'lifecycle': {
        started.child.kill('SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<'alive'>((resolve) => {
          timer = setTimeout(() => resolve('alive'), block.run.timeoutMs! + EXIT_MARGIN_MS);
        });
        const ended = await Promise.race([started.exited, deadline]);
        clearTimeout(timer);
        expect(ended, `${where} was still running ${block.run.timeoutMs! + EXIT_MARGIN_MS} ms after SIGTERM:\n${started.output()}`).not.toBe('alive');
        expect(ended, `${where} did not end cleanly after SIGTERM:\n${started.output()}`).toEqual({ code: 0, signal: null });
        break;
      }
    }
    expect(started.output(), `${where} printed an error:\n${started.output()}`).not.toMatch(/\b(Error|Unhandled|ECONNREFUSED)\b/);
  } finally {
    await stop(started);
  }
}

describe('the run markers', () => {
  it('mark every program that handles SIGTERM or listens, and each marked block is a program with its imports', () => {
    const unmarked = guideFiles()
      .flatMap((file) => codeBlocks(readDoc(file), file))
      .filter((block) => block.run === undefined && /process\.on\('SIG(TERM|INT)'|\.listen\(\d+\)/.test(block.code))
      .map((block) => `${block.file}:${block.line}`);
    expect(unmarked).toEqual([]);
    for (const block of marked) expect(block.code, `${block.file}:${block.line}`).toMatch(/^import /m);
    expect(marked.filter((block) => block.run.kind === 'lifecycle').every((block) => /SIG(TERM|INT)/.test(block.code))).toBe(true);
  });
});

// Each program starts tsx and its clients on a loaded two-core machine: minutes, not seconds.
describe("the guides' complete programs, run from the packed package", { timeout: 180_000 }, () => {
  for (const block of marked) {
    const name = `${block.file}:${block.line} (${block.run.kind}${block.run.needs.length ? `, ${block.run.needs.join(', ')}` : ''})`;
    const unavailable = block.run.needs.map(missing).find((reason) => reason !== undefined);
    if (unavailable !== undefined) {
      it.skip(`${name}: ${unavailable}`, () => {});
      continue;
    }
    if (block.run.fails !== undefined) {
      it.fails(`${name} fails as written: ${block.run.fails}`, () => exercise(block));
    } else {
      it(`${name} runs as written`, () => exercise(block));
    }
  }
});
