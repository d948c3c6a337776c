/**
 * The package as it ships: built by tsdown with the project's own configuration (ESM only, no
 * type declarations) into a fresh directory, and imported from there. Measuring the TypeScript
 * sources through tsx instead would time tsx's module wrappers too: every call across a module
 * boundary goes through a getter that the published bundle does not have.
 *
 * The directory lies under node_modules/.cache, so the bundle's own imports (the
 * frameworks) resolve as they do for an installed package. Two internal modules are built as
 * extra entries: `verify` for `createVerifierWith` and `crypto` for `webCryptoBackend`, which
 * force the WebCrypto path in section 3.
 */

import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from './report.ts';

/** The built entries a section uses, typed by their sources. */
export interface BuiltPackage {
  /** Where the build is: children import their entries from here (`express.mjs`, …). */
  dir: string;
  index: typeof import('../src/index.ts');
  redis: typeof import('../src/stores/redis.ts');
  postgres: typeof import('../src/stores/postgres.ts');
  dynamodb: typeof import('../src/stores/dynamodb.ts');
  /** Internal: `createVerifierWith`. */
  verify: typeof import('../src/verify.ts');
  /** Internal: `webCryptoBackend`, `defaultBackend`. */
  crypto: typeof import('../src/crypto.ts');
}

/** An entry of a build made by {@link buildPackage}, for a child process given `dir`. */
export async function importBuilt<T>(dir: string, entry: string): Promise<T> {
  return (await import(pathToFileURL(join(dir, `${entry}.mjs`)).href)) as T;
}

/**
 * Builds the package into a fresh directory; `remove()` deletes it. With `sourcemap`, each chunk
 * gets a source map, so a profile can name the source file of every frame (the code is the same).
 */
export async function buildPackage(options: { sourcemap?: boolean } = {}): Promise<BuiltPackage & { remove(): void }> {
  const dir = join(ROOT, 'node_modules', '.cache', 'webhook-receiver-bench', `${process.pid}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    // Loaded here, not at the top: the server children import `importBuilt` from this module and
    // would otherwise load tsdown at every start.
    const [{ build }, { default: projectConfig }] = await Promise.all([import('tsdown'), import('../tsdown.config.ts')]);
    const entry = projectConfig.entry;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new Error('tsdown.config.ts must name its entries in an object');
    await build({
      ...projectConfig,
      config: false,
      cwd: ROOT,
      entry: { ...entry, verify: 'src/verify.ts', crypto: 'src/crypto.ts' },
      outDir: dir,
      format: ['esm'],
      dts: false,
      sourcemap: options.sourcemap ?? false,
      clean: true,
      logLevel: 'error',
    });
    return {
      dir,
      index: await importBuilt(dir, 'index'),
      redis: await importBuilt(dir, 'redis'),
      postgres: await importBuilt(dir, 'postgres'),
      dynamodb: await importBuilt(dir, 'dynamodb'),
      verify: await importBuilt(dir, 'verify'),
      crypto: await importBuilt(dir, 'crypto'),
      remove,
    };
  } catch (error) {
    remove();
    throw error;
  }
}
