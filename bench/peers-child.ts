/**
 * The peer rows of section 1 on another Node line: run by peers.ts under that line's binary,
 * given the directory of the package built once by the parent. Prints one JSON object
 * (`LineRows`): for each valid request, each peer's median ratio over ours and our time per call.
 *
 *   <node> --import tsx bench/peers-child.ts <build dir> <quick|full>
 */

import { importBuilt } from './build.ts';
import { CASES, measurePeers, OURS, PEERS, type LineRows } from './peers.ts';
import { ratios, series, summarize } from './stats.ts';

const [dir, mode] = process.argv.slice(2);
if (dir === undefined) throw new Error('the first argument is the directory of the built package');
const pkg = {
  index: await importBuilt<typeof import('../src/index.ts')>(dir, 'index'),
  verify: await importBuilt<typeof import('../src/verify.ts')>(dir, 'verify'),
  crypto: await importBuilt<typeof import('../src/crypto.ts')>(dir, 'crypto'),
};
const valid = CASES.filter((c) => !c.forged);
const results = await measurePeers(pkg, valid, mode === 'quick');
const rows: LineRows = { version: process.versions.node, ratios: {}, ours: {} };
for (const peerCase of valid) {
  const timings = results.get(peerCase.label)!;
  const ours = series(timings, OURS);
  rows.ours[peerCase.label] = summarize(ours).median;
  rows.ratios[peerCase.label] = Object.fromEntries(PEERS.map((name) => [name, summarize(ratios(series(timings, name), ours)).median]));
}
process.stdout.write(JSON.stringify(rows));
