/**
 * Examples import the package by name ('webhook-receiver/express'), as a user's app does. In this
 * repository tsconfig.json maps those names to the source entries (so tsc, tsx and vitest need no
 * build); the package's "exports" map them to dist/, built from the entries in tsdown.config.ts.
 * The three must name the same entry points, or an example would test something users never get.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import buildConfig from '../../tsdown.config.ts';
import { root } from '../runtimes/harness.ts';

interface Exported {
  import: { types: string; default: string };
}

describe('how examples resolve webhook-receiver', () => {
  it('maps every subpath of the package to the source entry that its dist/ file is built from', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; exports: Record<string, Exported | string> };
    const read = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
    expect(read.error).toBeUndefined();
    const paths = (read.config as { compilerOptions: { paths: Record<string, string[]> } }).compilerOptions.paths;
    const config = Array.isArray(buildConfig) ? buildConfig[0] : buildConfig;
    const entries = (config as { entry: Record<string, string> }).entry;

    const expected: Record<string, string[]> = {};
    for (const [subpath, target] of Object.entries(pkg.exports)) {
      if (typeof target === 'string') continue; // ./package.json
      const built = /^\.\/dist\/(.+)\.mjs$/.exec(target.import.default)?.[1];
      expect(built, `${subpath} is built by tsdown`).toBeDefined();
      const source = entries[built!];
      expect(source, `tsdown.config.ts has an entry "${built}"`).toBeDefined();
      expected[`${pkg.name}${subpath.slice(1)}`] = [`./${source}`];
    }
    expect(paths).toEqual(expected);
  });
});
