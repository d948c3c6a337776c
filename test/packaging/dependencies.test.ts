/**
 * package.json tells the truth about what the package needs. The rule:
 *
 * - a package the shipped code always loads is a dependency;
 * - a package it may load (an adapter's framework, a CLI command's client) or whose types its
 *   declarations import is an optional peer;
 * - a client or framework the app hands in and the code uses by its shape alone (never imported)
 *   is an optional peer too, so npm holds the app to the versions the tests run against;
 * - each peer's range holds the version the tests install.
 *
 * The imports are read from the source (test/support/runtime-imports.ts), so a new import of a
 * package that is not declared, or a declared package nothing uses any more, fails here.
 */

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageImports } from '../support/runtime-imports.ts';

const root = resolve(import.meta.dirname, '../..');

/**
 * Whether `version` is within `range`, for the ranges peers use here: caret ranges joined by `||`
 * (`^4.21.0 || ^5.0.0`). Any other form throws, so a new one is noticed rather than misread.
 */
function satisfies(version: string, range: string): boolean {
  const [major, minor, patch] = version.split('.').map(Number) as [number, number, number];
  return range.split('||').some((part) => {
    const caret = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(part.trim());
    if (caret === null) throw new TypeError(`peer range ${JSON.stringify(range)}: only ^x.y.z ranges joined by || are read here`);
    const [low, lowMinor, lowPatch] = caret.slice(1).map(Number) as [number, number, number];
    if (major !== low) return false;
    return minor > lowMinor || (minor === lowMinor && patch >= lowPatch);
  });
}

interface Manifest {
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  devDependencies: Record<string, string>;
}

const manifest = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as Manifest;
const { runtime, typesOnly } = packageImports(root, ['src', 'adapters']);

/**
 * The packages used by shape only: the app passes in their objects (or runs the adapter inside
 * them) and the code never imports them. Each names the file that takes it, which must name it.
 */
const BY_SHAPE: Record<string, string> = {
  express: 'adapters/express.ts',
  koa: 'adapters/koa.ts',
  pg: 'src/stores/postgres/client.ts',
  postgres: 'src/stores/postgres/client.ts',
  redis: 'src/stores/redis/client.ts',
  '@upstash/redis': 'src/stores/redis/client.ts',
  '@opentelemetry/api': 'src/telemetry/types.ts',
};

/** What `name`'s installed copy says its version is. */
function installedVersion(name: string): string {
  return (JSON.parse(readFileSync(resolve(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
}

describe('package.json: dependencies and peers', () => {
  it('lists every package the code loads, as a dependency or an optional peer', () => {
    const declared = new Set([...Object.keys(manifest.dependencies), ...Object.keys(manifest.peerDependencies)]);
    const undeclared = [...runtime].filter(([name]) => !declared.has(name)).map(([name, files]) => `${name} (${files.join(', ')})`);
    expect(undeclared).toEqual([]);
  });

  it('makes dependencies only of what the code loads', () => {
    const unused = Object.keys(manifest.dependencies).filter((name) => !runtime.has(name));
    expect(unused).toEqual([]);
  });

  it('lists every package whose types the code imports as an optional peer', () => {
    expect([...typesOnly.keys()].filter((name) => manifest.peerDependencies[name] === undefined)).toEqual([]);
  });

  it('has no peer that the code neither imports nor takes by shape', () => {
    const used = new Set([...runtime.keys(), ...typesOnly.keys(), ...Object.keys(BY_SHAPE)]);
    expect(Object.keys(manifest.peerDependencies).filter((name) => !used.has(name))).toEqual([]);
    for (const [name, file] of Object.entries(BY_SHAPE)) {
      expect(manifest.peerDependencies[name], `${name} is a peer`).toBeDefined();
      // Still imported by nobody (else it belongs to the lists above), and still the file's business.
      expect(runtime.has(name) || typesOnly.has(name), `${name} is imported now: take it off BY_SHAPE`).toBe(false);
      expect(readFileSync(resolve(root, file), 'utf8'), `${file} names ${name}`).toContain(name);
    }
  });

  it('makes every peer optional, and describes no other', () => {
    expect(Object.keys(manifest.peerDependenciesMeta).sort()).toEqual(Object.keys(manifest.peerDependencies).sort());
    for (const [name, meta] of Object.entries(manifest.peerDependenciesMeta)) expect(meta.optional, name).toBe(true);
  });

  it('gives every peer a range that holds the version the tests run against', () => {
    for (const [name, range] of Object.entries(manifest.peerDependencies)) {
      expect(manifest.devDependencies[name], `${name} is installed for the tests`).toBeDefined();
      const version = installedVersion(name);
      expect(satisfies(version, range), `${name} ${version} within ${range}`).toBe(true);
    }
  });
});
