/**
 * What the runtime smoke tests need around the runtimes: a throw-away project that has the BUILT
 * package installed the way a package manager lays it out, the runtimes' binaries from
 * node_modules/.bin, bounded child processes, and a workerd bundle.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { build } from 'esbuild';

export const root = resolve(import.meta.dirname, '../..');

export type RuntimeName = 'bun' | 'deno' | 'workerd';

/** The runtime's binary, installed from npm like every other dev dependency. */
export function bin(name: RuntimeName): string {
  return join(root, 'node_modules', '.bin', name);
}

/** The entries the smoke suite imports: without them there is nothing to test. */
export function assertBuilt(): void {
  for (const entry of ['index', 'hono', 'fetch', 'testing']) {
    if (!existsSync(join(root, 'dist', `${entry}.mjs`))) throw new Error(`dist/${entry}.mjs is missing: run npm run build first`);
  }
}

interface PackageJson {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
}

function readPackage(dir: string): PackageJson {
  return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as PackageJson;
}

export interface Project {
  dir: string;
  remove(): void;
}

/**
 * A temporary app project: its own package.json, `node_modules/webhook-receiver` holding a copy of
 * the package's package.json and dist/ (what `npm install` puts there), and the package's
 * dependencies and the app's `hono` beside it (links to this repository's installed copies).
 * The smoke entry points and the Bun, Deno and Worker examples are copied in, so they import
 * 'webhook-receiver' by name, resolved through the package's "exports" as in a user's app.
 */
export function createProject(): Project {
  const dir = mkdtempSync(join(tmpdir(), 'webhook-receiver-runtimes-'));
  const pkg = readPackage(root);
  const installed = join(dir, 'node_modules', pkg.name);
  mkdirSync(installed, { recursive: true });
  cpSync(join(root, 'package.json'), join(installed, 'package.json'));
  cpSync(join(root, 'dist'), join(installed, 'dist'), { recursive: true });

  const linked = [...Object.keys(pkg.dependencies ?? {}), 'hono'];
  for (const name of linked) symlinkSync(join(root, 'node_modules', name), join(dir, 'node_modules', name), 'dir');
  const dependencies = Object.fromEntries([[pkg.name, pkg.version], ...['hono'].map((name) => [name, readPackage(join(root, 'node_modules', name)).version])]);
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'runtime-smoke', private: true, type: 'module', dependencies }, null, 2)}\n`);

  for (const file of ['smoke.ts', 'smoke-cli.ts', 'smoke-worker.ts']) cpSync(join(root, 'test', 'runtimes', file), join(dir, file));
  for (const file of ['bun.ts', 'deno.ts', 'cloudflare-worker.ts']) cpSync(join(root, 'examples', file), join(dir, file));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface RunOptions {
  cwd: string;
  env?: Record<string, string>;
  timeoutMs: number;
}

function childEnv(extra: Record<string, string> | undefined): NodeJS.ProcessEnv {
  return { ...process.env, NO_COLOR: '1', ...extra };
}

/** Runs a command to its end (killed after `timeoutMs`), collecting its output. */
export function run(command: string, args: string[], { cwd, env, timeoutMs }: RunOptions): Promise<Finished> {
  return new Promise((resolvePromise, reject) => {
    const started = performance.now();
    const child = spawn(command, args, { cwd, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code, signal) => resolvePromise({ code, signal, stdout, stderr, ms: Math.round(performance.now() - started) }));
  });
}

/** The first line of `<runtime> --version`, e.g. 'bun 1.4.5' is printed as '1.4.5' by Bun itself. */
export async function versionOf(name: RuntimeName): Promise<string> {
  const result = await run(bin(name), ['--version'], { cwd: root, timeoutMs: 10_000 });
  if (result.code !== 0) throw new Error(`${name} --version failed: ${result.stderr}`);
  return result.stdout.split('\n')[0]!.trim();
}

/** The line an example prints once it listens; the URL is its webhook endpoint. */
const LISTENING = /listening on (http:\/\/127\.0\.0\.1:\d+\/webhooks)/;

export interface ServerProcess {
  url: string;
  /** Everything the process printed so far, stdout and stderr together. */
  output(): string;
  stop(): Promise<void>;
}

function waitForExit(child: ChildProcess, ms: number): Promise<void> {
  return new Promise((resolvePromise) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolvePromise();
      return;
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
    }, ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolvePromise();
    });
  });
}

/** Starts a server process and resolves once it printed its `listening on …` line. */
export function startServer(command: string, args: string[], { cwd, env, timeoutMs }: RunOptions): Promise<ServerProcess> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let settled = false;
    const stop = async (): Promise<void> => {
      child.kill('SIGTERM');
      await waitForExit(child, 2000);
    };
    const fail = (reason: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void stop().then(() => reject(new Error(`${reason}; output:\n${output}`)));
    };
    const timer = setTimeout(() => fail(`no "listening on" line within ${timeoutMs} ms`), timeoutMs);
    const onData = (chunk: string): void => {
      output += chunk;
      const match = LISTENING.exec(output);
      if (match && !settled) {
        settled = true;
        clearTimeout(timer);
        resolvePromise({ url: match[1]!, output: () => output, stop });
      }
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    child.once('error', (error) => fail(`could not start ${command}: ${error.message}`));
    child.once('exit', (code, signal) => fail(`${command} exited (code ${code}, signal ${signal}) before listening`));
  });
}

/**
 * Bundles a worker the way Wrangler does for workerd: one ES module, with the `workerd`, `worker`
 * and `browser` export conditions, and no Node built-ins available to resolve. Resolves with the
 * module's text, and writes it to `outfile` (relative to `project`) when one is given.
 */
export async function bundleWorker(project: string, entry: string, outfile?: string, { tsconfig }: { tsconfig?: string } = {}): Promise<string> {
  const result = await build({
    absWorkingDir: project,
    entryPoints: [entry],
    write: false,
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    ...(tsconfig === undefined ? {} : { tsconfig }),
    logLevel: 'silent',
  });
  const text = result.outputFiles[0]!.text;
  if (outfile !== undefined) {
    const path = resolve(project, outfile);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }
  return text;
}

/** The report line a smoke entry point printed. */
export function reportOf<T>(stdout: string): T {
  const line = stdout.split('\n').find((text) => text.startsWith('SMOKE_REPORT '));
  if (line === undefined) throw new Error(`no SMOKE_REPORT line in the output:\n${stdout}`);
  return JSON.parse(line.slice('SMOKE_REPORT '.length)) as T;
}
