/**
 * `npm pack` on a fresh clone ships the build: a clone has no dist/, and
 * before `prepack` built it, packing one gave four files (README, LICENSE, SECURITY.md,
 * package.json) and every entry point was missing, so a publish without a build, or an install
 * from a tarball packed that way, shipped nothing.
 *
 * The clone is the files git tracks, copied from the working tree (what a checkout of this commit
 * holds, local edits included), with this repository's node_modules linked in as `npm ci` would
 * have installed them. Packing it runs `prepack`, which builds; the tarball must then hold every
 * file package.json's "exports" and "bin" name. No `prepare` script: it would make npm install
 * every development dependency into each app that installs the package from a git URL.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docsFiles, readmeDocsLinks, root, run } from './support.ts';

interface PackageJson {
  scripts: Record<string, string>;
  exports: Record<string, string | Record<string, string | Record<string, string>>>;
  bin: Record<string, string>;
  files: string[];
}

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as PackageJson;

/** Every file path named in "exports" (all conditions, nested) and "bin", without the leading `./`. */
function namedFiles(): string[] {
  const paths: string[] = [];
  const walk = (value: unknown): void => {
    if (typeof value === 'string') paths.push(value.replace(/^\.\//, ''));
    else if (typeof value === 'object' && value !== null) for (const inner of Object.values(value)) walk(inner);
  };
  walk(pkg.exports);
  walk(pkg.bin);
  return [...new Set(paths)].sort();
}

let clone: string;
let packed: string[];

beforeAll(() => {
  const tracked = execFileSync('git', ['ls-files', '-z', '--cached'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
  clone = mkdtempSync(join(tmpdir(), 'webhook-receiver-clone-'));
  for (const file of tracked) {
    // A file deleted in the working tree but still in the index is not in a fresh checkout of it.
    if (!existsSync(join(root, file))) continue;
    mkdirSync(dirname(join(clone, file)), { recursive: true });
    copyFileSync(join(root, file), join(clone, file));
  }
  expect(existsSync(join(clone, 'dist')), 'a fresh clone has no dist/').toBe(false);
  symlinkSync(join(root, 'node_modules'), join(clone, 'node_modules'), 'dir');
  // Runs prepack (the build) in the clone, then packs: nothing is written to this repository.
  const json = run('npm', ['pack', '--json', '--dry-run', '--loglevel=error'], clone);
  // The build's own output comes first on stdout; npm's JSON starts at a line of its own.
  const start = /^\[$/m.exec(json)?.index ?? -1;
  expect(start, `npm pack printed no JSON:\n${json}`).toBeGreaterThanOrEqual(0);
  packed = (JSON.parse(json.slice(start)) as [{ files: { path: string }[] }])[0].files.map((file) => file.path);
}, 300_000);

afterAll(() => {
  if (clone) rmSync(clone, { recursive: true, force: true });
});

describe('npm pack on a fresh clone', { timeout: 300_000 }, () => {
  it('builds on prepack, and has no prepare script', () => {
    expect(pkg.scripts.prepack).toBe('npm run build');
    expect(pkg.scripts.prepare).toBeUndefined();
  });

  it('packs every entry point that package.json names', () => {
    const named = namedFiles();
    expect(named.length).toBeGreaterThanOrEqual(13 * 4 + 1);
    expect(named.filter((path) => !packed.includes(path))).toEqual([]);
  });

  it('packs the build, the three documents and the guides, nothing else', () => {
    expect(packed.filter((path) => !path.startsWith('dist/') && !path.startsWith('docs/')).sort()).toEqual(['LICENSE', 'README.md', 'SECURITY.md', 'package.json']);
    expect(packed.filter((path) => path.startsWith('docs/')).sort()).toEqual(docsFiles());
  });

  it("packs every docs/ file the README links to, so its links resolve in an installed copy", () => {
    const linked = readmeDocsLinks();
    // The guides' index, the stack guides, the error table, the benchmark chart…
    expect(linked).toEqual(expect.arrayContaining(['docs/README.md', 'docs/express.md', 'docs/errors.md', 'docs/benchmarks/peers.svg']));
    expect(linked.filter((path) => !packed.includes(path))).toEqual([]);
  });
});
