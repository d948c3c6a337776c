/**
 * `instanceof WebhookError` (and `PermanentError`) across module copies: the CommonJS
 * and the ES module build in one process, and a second installed copy of the package, each have
 * their own class. The built `dist/` is what users load, so the test runs against it (npm test
 * builds first).
 */

import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Build {
  WebhookError: new (code: 'MISSING_ID', message: string) => Error & { code: string; status: number };
  PermanentError: new (message?: string) => Error & { code: string; status: number };
  isWebhookError: (value: unknown) => boolean;
}

const root = resolve(import.meta.dirname, '../..');
const require = createRequire(import.meta.url);
let copy: string;
let builds: Record<string, Build>;

beforeAll(async () => {
  if (!existsSync(join(root, 'dist/index.mjs'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
  // A second installed copy: the same files under another node_modules, loaded apart from the first.
  copy = mkdtempSync(join(tmpdir(), 'webhook-receiver-copy-'));
  cpSync(join(root, 'dist'), join(copy, 'node_modules/webhook-receiver/dist'), { recursive: true });
  cpSync(join(root, 'package.json'), join(copy, 'node_modules/webhook-receiver/package.json'));
  writeFileSync(join(copy, 'package.json'), '{"name":"copy","private":true}');
  // Its runtime dependencies, as npm would install them beside it.
  const { dependencies = {} } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  for (const name of Object.keys(dependencies)) symlinkSync(join(root, 'node_modules', name), join(copy, 'node_modules', name), 'dir');
  builds = {
    esm: (await import(pathToFileURL(join(root, 'dist/index.mjs')).href)) as Build,
    cjs: require(join(root, 'dist/index.cjs')) as Build,
    'second copy (esm)': (await import(pathToFileURL(join(copy, 'node_modules/webhook-receiver/dist/index.mjs')).href)) as Build,
    'second copy (cjs)': require(join(copy, 'node_modules/webhook-receiver/dist/index.cjs')) as Build,
  };
}, 60_000);

afterAll(() => {
  if (copy) rmSync(copy, { recursive: true, force: true });
});

describe('instanceof WebhookError across builds and copies', () => {
  it('the classes are distinct, yet every error is an instance of every one', () => {
    const names = Object.keys(builds);
    expect(new Set(names.map((name) => builds[name]!.WebhookError)).size).toBe(names.length);
    for (const maker of names) {
      const error = new builds[maker]!.WebhookError('MISSING_ID', 'no id');
      for (const checker of names) {
        expect(error instanceof builds[checker]!.WebhookError, `${maker} error instanceof ${checker} class`).toBe(true);
        expect(builds[checker]!.isWebhookError(error), `${checker} isWebhookError(${maker} error)`).toBe(true);
      }
    }
  });

  it('a PermanentError made by any copy is a PermanentError (and a WebhookError) to every copy', () => {
    const names = Object.keys(builds);
    expect(new Set(names.map((name) => builds[name]!.PermanentError)).size).toBe(names.length);
    for (const maker of names) {
      const permanent = new builds[maker]!.PermanentError('gone for good');
      const plain = new builds[maker]!.WebhookError('MISSING_ID', 'no id');
      for (const checker of names) {
        expect(permanent instanceof builds[checker]!.PermanentError, `${maker} PermanentError instanceof ${checker} class`).toBe(true);
        expect(permanent instanceof builds[checker]!.WebhookError, `${maker} PermanentError instanceof ${checker} WebhookError`).toBe(true);
        expect(plain instanceof builds[checker]!.PermanentError, `${maker} WebhookError instanceof ${checker} PermanentError`).toBe(false);
      }
    }
  });

  it('look-alikes and other errors are not instances', () => {
    for (const build of Object.values(builds)) {
      expect(new Error('x') instanceof build.WebhookError).toBe(false);
      expect({ name: 'WebhookError', code: 'MISSING_ID', status: 400 } instanceof build.WebhookError).toBe(false);
      for (const value of [null, 'MISSING_ID', 415] as unknown[]) expect((value as object) instanceof build.WebhookError).toBe(false);
    }
  });

  it('a subclass keeps the ordinary prototype test', () => {
    const { WebhookError } = builds.esm!;
    class Special extends WebhookError {}
    expect(new Special('MISSING_ID', 'x') instanceof Special).toBe(true);
    expect(new WebhookError('MISSING_ID', 'x') instanceof Special).toBe(false);
    expect(new Special('MISSING_ID', 'x') instanceof builds.cjs!.WebhookError).toBe(true);
  });
});
