/**
 * Vitest global setup: the command line bundled for the run, and again before each rerun in watch
 * mode (see ./cli-entry.ts, which tests read it through); removed at the end.
 */

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The bundled entry of the command line, built from the sources for this run. */
    cliEntry: string;
  }
}

const root = resolve(import.meta.dirname, '../..');
let dir: string | undefined;

/** Bundles the command line into `into`, replacing what was there. */
async function bundle(into: string): Promise<void> {
  rmSync(into, { recursive: true, force: true });
  await build({
    entryPoints: { index: join(root, 'src/cli/index.ts') },
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    packages: 'external',
    outdir: into,
    logLevel: 'silent',
  });
}

export async function setup(project: TestProject): Promise<void> {
  // Under the project, so that the bundle's external imports resolve from its node_modules, and
  // its `../../package.json` (where the command reads its version) is the project's.
  mkdirSync(join(root, '.tmp'), { recursive: true });
  const into = mkdtempSync(join(root, '.tmp', 'cli-'));
  dir = into;
  await bundle(into);
  // In watch mode, each rerun gets the command as the sources are now.
  project.onTestsRerun(() => bundle(into));
  project.provide('cliEntry', join(into, 'index.js'));
}

export function teardown(): void {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
}
