/**
 * A throw-away consumer project with the packed package installed from its tarball, and the
 * commands run in it: shared by the packaging tests.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const root = resolve(import.meta.dirname, '../..');

/**
 * The files under docs/ that README.md links to (inline links and images, anchors dropped; a link
 * to a folder means its README.md): an installed copy must hold them for the README's links to
 * resolve in node_modules, as there is no public URL to link to instead.
 */
export function readmeDocsLinks(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  const targets = [...readme.matchAll(/\]\((docs\/[^)#\s]*)(?:#[^)\s]*)?\)/g)].map((match) => match[1]!);
  return [...new Set(targets.map((target) => (target.endsWith('/') ? `${target}README.md` : target)))].sort();
}

/** The files under docs/, as a packed tarball must hold them. */
export function docsFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? walk(`${dir}/${entry.name}`) : [`${dir}/${entry.name}`]));
  return walk('docs').sort();
}

/** Runs a command in `cwd` and returns its stdout; npm and tsc get minutes on a loaded two-core machine. */
export function run(command: string, args: string[], cwd: string): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 240_000 });
}

/** `tsc --noEmit -p <config>` in `project` with this repository's TypeScript: its exit code and diagnostics. */
export function typeCheck(project: string, config: string): { code: number; output: string } {
  try {
    return { code: 0, output: run('node', [join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', config], project) };
  } catch (error) {
    const failed = error as { status: number | null; stdout: string; stderr: string };
    return { code: failed.status ?? -1, output: failed.stdout + failed.stderr };
  }
}

/** `name@version` at the version this repository tests with. */
export function pinned(name: string): string {
  return `${name}@${(JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version}`;
}

/**
 * A fresh project in the temp directory with the built package installed from `npm pack`, beside
 * `dependencies` (the user's own frameworks and type packages). Returns its directory.
 */
export function consumerProject(dependencies: string[]): string {
  if (!existsSync(join(root, 'dist/index.mjs'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
  const project = mkdtempSync(join(tmpdir(), 'webhook-receiver-consumer-'));
  // The test command built dist/ already: --ignore-scripts skips the prepack build, which would
  // rebuild (and empty dist/ meanwhile) under the other packaging tests.
  run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', project], root);
  const tarball = readdirSync(project).find((name) => name.endsWith('.tgz'));
  if (!tarball) throw new Error('npm pack made no tarball');
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, version: '1.0.0' }));
  run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', `./${tarball}`, ...dependencies], project);
  return project;
}
