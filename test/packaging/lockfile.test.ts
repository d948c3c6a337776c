/**
 * `npm ci` (what CI and a fresh clone run) refuses a lock file that lacks an entry for any
 * optional dependency of a locked package, whatever the platform: a package whose other-platform
 * builds are missing from the registry the lock was made against breaks every fresh install while
 * `npm install` on the machine that wrote it still works. Checked here, without the network.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

interface LockedPackage {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

const ROOT = join(import.meta.dirname, '..', '..');
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { lockfileVersion: number; packages: Record<string, LockedPackage> };
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies?: Record<string, string> };

/** Where npm would find `name` for the package at `path`: its own node_modules, then each parent's. */
function resolve(path: string, name: string): LockedPackage | undefined {
  let base = path;
  for (;;) {
    const found = lock.packages[`${base === '' ? '' : `${base}/`}node_modules/${name}`];
    if (found !== undefined) return found;
    if (base === '') return undefined;
    const cut = base.lastIndexOf('/node_modules/');
    base = cut === -1 ? '' : base.slice(0, cut);
  }
}

describe('package-lock.json', () => {
  it('is a v3 lock file with the root package in it', () => {
    expect(lock.lockfileVersion).toBe(3);
    expect(lock.packages['']).toBeDefined();
  });

  it('locks every optional dependency of every locked package (npm ci refuses it otherwise)', () => {
    const missing: string[] = [];
    for (const [path, locked] of Object.entries(lock.packages)) {
      for (const name of Object.keys(locked.optionalDependencies ?? {})) {
        if (resolve(path, name) === undefined) missing.push(`${path || '(root)'} → ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('locks every dev dependency package.json names', () => {
    const missing = Object.keys(manifest.devDependencies ?? {}).filter((name) => resolve('', name) === undefined);
    expect(missing).toEqual([]);
  });
});
