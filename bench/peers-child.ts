/**
 * The peer rows of section 1 on another Node line: run by peers.ts under that line's binary,
 * given the directory of the package built once by the parent. Prints one JSON object
 * (`LineRows`): for every request, every candidate's time per call and its ratios over ours and
 * over the floor.
 *
 *   <node> --import tsx bench/peers-child.ts <build dir> <quick|full>
 */

import { importBuilt } from './build.ts';
import { CASES, lineRowsOf, measurePeers, type LineRows } from './peers.ts';

const [dir, mode] = process.argv.slice(2);
if (dir === undefined) throw new Error('the first argument is the directory of the built package');
const pkg = {
  index: await importBuilt<typeof import('../src/index.ts')>(dir, 'index'),
  verify: await importBuilt<typeof import('../src/verify.ts')>(dir, 'verify'),
  crypto: await importBuilt<typeof import('../src/crypto.ts')>(dir, 'crypto'),
};
const results = await measurePeers(pkg, CASES, mode === 'quick');
const rows: LineRows = { version: process.versions.node, rows: lineRowsOf(results) };
process.stdout.write(JSON.stringify(rows));
