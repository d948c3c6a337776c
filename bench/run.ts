/**
 * `npm run bench`: every section, a Markdown report printed and written to bench/RESULTS.md.
 *
 *   npm run bench                       the full run (about ten minutes), writes bench/RESULTS.md
 *   npm run bench -- --quick            the smoke run: few iterations, short HTTP runs (not a measurement)
 *   npm run bench -- --only <section>   one section: verify, rotation, webcrypto, http, redis, memory, forged, stores
 *   npm run bench -- --out <file>       write the report there (a quick or partial run writes nowhere by default)
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { buildPackage } from './build.ts';
import { runForged } from './forged.ts';
import { runHttp } from './http.ts';
import { runMemory } from './memory.ts';
import { runRedis } from './redis.ts';
import { renderReport, ROOT, SECTION_IDS, type BenchConfig, type SectionId, type SectionReport } from './report.ts';
import { runRotation } from './rotation.ts';
import { runStores } from './stores.ts';
import { runVerify } from './verify.ts';
import { runWebCrypto } from './webcrypto.ts';

const SECTIONS: Record<SectionId, (config: BenchConfig) => Promise<SectionReport>> = {
  verify: runVerify,
  rotation: runRotation,
  webcrypto: runWebCrypto,
  http: runHttp,
  redis: runRedis,
  memory: runMemory,
  forged: runForged,
  stores: runStores,
};

function isSectionId(value: string): value is SectionId {
  return (SECTION_IDS as readonly string[]).includes(value);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      out: { type: 'string' },
    },
    strict: true,
  });
  const only = values.only;
  if (only !== undefined && !isSectionId(only)) {
    throw new TypeError(`--only takes one of ${SECTION_IDS.join(', ')}; got ${JSON.stringify(only)}`);
  }
  const startedAt = new Date();
  const start = performance.now();
  const pkg = await buildPackage();
  const config: BenchConfig = { quick: values.quick ?? false, pkg };

  const reports: SectionReport[] = [];
  try {
    for (const id of only === undefined ? SECTION_IDS : [only]) {
      process.stderr.write(`bench: ${id}…\n`);
      const sectionStart = performance.now();
      const report = await SECTIONS[id](config);
      report.seconds = (performance.now() - sectionStart) / 1000;
      process.stderr.write(`bench: ${id} done in ${report.seconds.toFixed(1)} s\n`);
      reports.push(report);
    }
  } finally {
    pkg.remove();
  }

  const markdown = renderReport(reports, { startedAt, seconds: (performance.now() - start) / 1000, quick: config.quick, only });
  process.stdout.write(markdown);
  // Only a full run replaces the committed results; a smoke or partial run writes where told.
  const out = values.out ?? (config.quick || only !== undefined ? undefined : join(ROOT, 'bench', 'RESULTS.md'));
  if (out !== undefined) {
    writeFileSync(out, markdown);
    process.stderr.write(`bench: written to ${out}\n`);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
