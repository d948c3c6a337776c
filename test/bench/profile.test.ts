/**
 * `npm run bench:profile`: how it shares a CPU profile's samples out, and one real run of two
 * HTTP cells under load, as a child process. Nothing here asserts a speed: only that the samples
 * are attributed where their code is and that the report's parts add up to what was sampled.
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { partOf, profileParts, type CpuProfile } from '../../bench/profile.ts';

const root = resolve(import.meta.dirname, '../..');
// Two servers and a load generator started, two one-second runs each and a warm-up: about 20 s on
// a quiet machine. Nothing is timed against this limit: it only stops a run that hangs.
const TIME_LIMIT_MS = 240_000;

describe('partOf', () => {
  it('attributes each sample by where its code is', () => {
    expect(partOf({ functionName: 'writeLatin1String', url: '' })).toBe('the kernel: socket writes');
    expect(partOf({ functionName: '(garbage collector)', url: '' })).toBe('garbage collector');
    expect(partOf({ functionName: '(program)', url: '' })).toBe('V8 and libuv, outside JavaScript');
    expect(partOf({ functionName: 'digest', url: '' })).toBe('native: HMAC');
    expect(partOf({ functionName: 'runMicrotasks', url: '' })).toBe('native: other');
    expect(partOf({ functionName: 'claim', url: 'file:///app/node_modules/.cache/webhook-receiver-bench/1-2/job-format-x.mjs' })).toBe('this package');
    expect(partOf({ functionName: 'route', url: 'file:///app/node_modules/fastify/lib/route.js' })).toBe('dependency: fastify');
    expect(partOf({ functionName: 'listener', url: 'file:///app/node_modules/@hono/node-server/dist/index.mjs' })).toBe('dependency: @hono/node-server');
    expect(partOf({ functionName: 'parserOnHeadersComplete', url: 'node:_http_common' })).toBe('Node: HTTP (parser, server, response)');
    expect(partOf({ functionName: 'Readable.read', url: 'node:internal/streams/readable' })).toBe('Node: streams');
    expect(partOf({ functionName: 'emit', url: 'node:events' })).toBe('Node: events');
    expect(partOf({ functionName: 'decode', url: 'node:internal/encoding' })).toBe('Node: buffers and text decoding');
    expect(partOf({ functionName: 'wrapSafe', url: 'node:internal/modules/cjs/loader' })).toBe('Node: other');
    expect(partOf({ functionName: 'claim', url: 'file:///app/bench/bare-map.ts' })).toBe("the bench's code (handler, hand-written check, bare Map)");
  });
});

describe('profileParts', () => {
  it('gives each sample the time until the next one and leaves idle samples out', () => {
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 } },
        { id: 2, callFrame: { functionName: '(idle)', url: '', lineNumber: -1 } },
        { id: 3, callFrame: { functionName: 'claim', url: 'file:///app/bench/bare-map.ts', lineNumber: 15 } },
        { id: 4, callFrame: { functionName: '(garbage collector)', url: '', lineNumber: -1 } },
      ],
      samples: [3, 2, 4, 3, 3],
      timeDeltas: [0, 100, 200, 300, 400],
    };
    const parts = profileParts(profile);
    // claim: 100 (to the idle sample) + 400 (to the last) + 0 (the last has no next); gc: 300.
    expect(parts.busyMicros).toBe(800);
    expect(parts.parts.get("the bench's code (handler, hand-written check, bare Map)")).toBe(500);
    expect(parts.parts.get('garbage collector')).toBe(300);
    expect(parts.functions.get('claim bench/bare-map.ts:16')).toBe(500);
  });

  it('refuses a sample of a node the profile does not list', () => {
    const profile: CpuProfile = { nodes: [], samples: [7], timeDeltas: [0] };
    expect(() => profileParts(profile)).toThrow(/node 7/);
  });
});

/** `bench/profile.ts` with `args`, on this process's own Node line (it re-runs itself on Node 26 unless told otherwise). */
async function profileCommand(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const line = process.versions.node.split('.')[0]!;
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/profile.ts', ...args, '--node', line], { cwd: root, timeout: TIME_LIMIT_MS });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((done, fail) => {
    child.once('error', fail);
    child.once('close', done);
  });
  return { code, stdout, stderr };
}

describe('npm run bench:profile', () => {
  it('profiles two cells under load and reports parts that add up to the sampled time', { timeout: TIME_LIMIT_MS }, async () => {
    const out = mkdtempSync(join(tmpdir(), 'bench-profile-'));
    onTestFinished(() => rmSync(out, { recursive: true, force: true }));
    const { code, stdout, stderr } = await profileCommand(['node:http/verify', 'node:http/inline', '--seconds', '1', '--reps', '1', '--diff', '--out', out]);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain(`Node ${process.versions.node}`);

    const rows = new Map<string, string[]>();
    for (const row of stdout.split('\n').filter((l) => l.startsWith('| ')).map((l) => l.slice(2, -2).split(' | '))) {
      if (!rows.has(row[0]!)) rows.set(row[0]!, row.slice(1));
    }
    expect(rows.get('µs per request')).toEqual(['node:http/verify', 'node:http/inline', 'node:http/verify − node:http/inline']);
    const figure = (name: string, column: number) => Number(rows.get(name)![column]);
    for (const column of [0, 1]) {
      const busy = figure('main thread busy (samples)', column);
      expect(busy).toBeGreaterThan(0);
      expect(figure('server CPU time (all threads)', column)).toBeGreaterThan(0);
      // Each cell's parts (the indented rows) sum to its busy time, give or take their rounding.
      const parts = [...rows].filter(([name]) => name.startsWith('  ')).map(([, cells]) => Number(cells[column]));
      expect(Math.abs(parts.reduce((a, b) => a + b, 0) - busy)).toBeLessThanOrEqual(0.05 * parts.length + 0.05);
    }
    // Our adapter's samples are this package's; the hand-written check is the bench's own code.
    expect(figure('  this package', 0)).toBeGreaterThan(0);
    expect(figure('  this package', 1)).toBe(0);
    // The difference column is the first cell less the second.
    const busyDiff = Number(rows.get('main thread busy (samples)')![2]);
    expect(busyDiff).toBeCloseTo(figure('main thread busy (samples)', 0) - figure('main thread busy (samples)', 1), 0);
    // --out keeps each cell's profile for DevTools.
    const written = readdirSync(out).sort();
    expect(written).toEqual(['node-http-inline.cpuprofile', 'node-http-verify.cpuprofile']);
    const saved = JSON.parse(readFileSync(join(out, written[0]!), 'utf8')) as CpuProfile;
    expect(saved.samples.length).toBeGreaterThan(0);
  });

  it('with --rate, loads every cell at that pace rather than as fast as it answers', { timeout: TIME_LIMIT_MS }, async () => {
    const { code, stdout, stderr } = await profileCommand(['node:http/verify', 'node:http/inline', '--seconds', '2', '--reps', '1', '--rate', '100']);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain('under load (10 connections, 100 requests a second)');
    const counts = /requests profiled: node:http\/verify (\d+), node:http\/inline (\d+)/.exec(stdout);
    expect(counts, stdout).not.toBeNull();
    // Two seconds at 100 a second, where either server answers thousands a second as fast as it
    // can. autocannon paces in bursts and catches up after a slow start (up to a second's worth
    // more was seen in a two-second run), and on a loaded machine it may fall behind the pace: so
    // a bound above, and the run's own check that every answer was a processed 204.
    for (const count of [Number(counts![1]), Number(counts![2])]) {
      expect(count).toBeGreaterThan(0);
      expect(count).toBeLessThanOrEqual(400);
    }
  });

  it('refuses a --rate that is not a whole number above 0', { timeout: TIME_LIMIT_MS }, async () => {
    const { code, stderr } = await profileCommand(['node:http/verify', '--rate', 'fast']);
    expect(code).not.toBe(0);
    expect(stderr).toContain('--rate takes a whole number above 0; got "fast"');
  });
});
