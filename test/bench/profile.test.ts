/**
 * `npm run bench:profile`: how it shares a CPU profile's samples out, and one real run of two
 * HTTP cells under load, as a child process; `npm run bench:profile:pair` the same way, with one
 * real run of each pair (section 11's two candidates, section 3's). Nothing here asserts a speed: only that the samples
 * are attributed where their code is and that the report's parts add up to what was sampled.
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { describe, expect, it, onTestFinished } from 'vitest';
import { partOf, profileParts, type CpuProfile } from '../../bench/profile.ts';
import { addSamples, CLAIM_PARTS, emptyPairProfile, partOfFrame, sourceOf, WEBCRYPTO_NODE_PARTS, WEBCRYPTO_PARTS } from '../../bench/profile-pair.ts';

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

/** `script` with `args`, on this process's own Node line (it re-runs itself on Node 26 unless told otherwise). */
async function profileCommand(args: readonly string[], script = 'bench/profile.ts'): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const line = process.versions.node.split('.')[0]!;
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args, '--node', line], { cwd: root, timeout: TIME_LIMIT_MS });
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

describe('partOfFrame', () => {
  it('names the guarantee of each file of the package, and the bench\'s own parts', () => {
    expect(partOfFrame(CLAIM_PARTS, 'src/stores/memory/space.ts', 'issue')).toMatch(/^fencing/);
    expect(partOfFrame(CLAIM_PARTS, 'src/stores/memory/space.ts', 'owns')).toMatch(/^fencing/);
    expect(partOfFrame(CLAIM_PARTS, 'src/stores/memory/space.ts', 'makeRoom')).toMatch(/^the store's record/);
    expect(partOfFrame(CLAIM_PARTS, 'src/stores/internal.ts', 'checkClaim')).toMatch(/^the store's arguments checked/);
    expect(partOfFrame(CLAIM_PARTS, 'src/stores/internal.ts', 'isUnsignedKey')).toMatch(/^renewal, cancellation/);
    expect(partOfFrame(CLAIM_PARTS, 'src/receiver/input.ts', 'isRequest')).toMatch(/^the claim protocol/);
    expect(partOfFrame(CLAIM_PARTS, 'src/claims.ts', 'settle')).toMatch(/^renewal, cancellation/);
    expect(partOfFrame(CLAIM_PARTS, 'src/lib/linked-set.ts', 'add')).toMatch(/^renewal, cancellation/);
    expect(partOfFrame(CLAIM_PARTS, 'src/verify/wire.ts', 'single')).toMatch(/^verification/);
    expect(partOfFrame(CLAIM_PARTS, 'src/telemetry/observer.ts', 'start')).toBe('telemetry, off');
    expect(partOfFrame(CLAIM_PARTS, 'bench/bare-map.ts', 'claim')).toBe('the bare Map');
    expect(partOfFrame(CLAIM_PARTS, 'bench/fixtures.ts', 'run')).toMatch(/^the bench's loop/);
    // A file no part names is shown by its path, never folded into another part.
    expect(partOfFrame(CLAIM_PARTS, 'src/inbox/gate.ts', 'open')).toBe('elsewhere in the repository: src/inbox/gate.ts');
  });

  it("names the WebCrypto path's parts, ours and the hand-written check's", () => {
    expect(partOfFrame(WEBCRYPTO_PARTS, 'src/crypto.ts', 'webHmac')).toMatch(/^the HMAC through `crypto.subtle`/);
    expect(partOfFrame(WEBCRYPTO_PARTS, 'src/lib/encoding.ts', 'constantTimeEqualBase64')).toMatch(/^the signature list compared/);
    expect(partOfFrame(WEBCRYPTO_PARTS, 'src/verify/wire.ts', 'parseSignatureHeader')).toMatch(/^headers, timestamp and signature list/);
    expect(partOfFrame(WEBCRYPTO_PARTS, 'src/verify.ts', 'verify')).toMatch(/^the verifier around them/);
    expect(partOfFrame(WEBCRYPTO_PARTS, 'bench/fixtures.ts', 'handWrittenWebCryptoVerify')).toMatch(/^the hand-written check/);
    expect(partOfFrame(WEBCRYPTO_PARTS, 'bench/fixtures.ts', 'handWrittenMatch')).toMatch(/^the hand-written compare/);
    expect(partOfFrame(WEBCRYPTO_PARTS, 'bench/stats.ts', 'inFlight')).toMatch(/^the bench's loop/);
    expect(partOfFrame(WEBCRYPTO_PARTS, 'bench/profile-pair.ts', 'profilePair')).toMatch(/^the profiler's own/);
  });

  it('reads the repository file of a frame, and nothing outside it', () => {
    expect(sourceOf({ functionName: 'claim', url: `file://${root}/bench/bare-map.ts`, lineNumber: 0 })).toBe('bench/bare-map.ts');
    expect(sourceOf({ functionName: 'route', url: `file://${root}/node_modules/fastify/lib/route.js`, lineNumber: 0 })).toBeUndefined();
    expect(sourceOf({ functionName: 'emit', url: 'node:events', lineNumber: 0 })).toBeUndefined();
    expect(sourceOf({ functionName: 'digest', url: '', lineNumber: 0 })).toBeUndefined();
  });
});

describe('addSamples', () => {
  it('gives each sample to the innermost frame of the repository on its stack', () => {
    const at = (file: string) => `file://${root}/${file}`;
    // root → the bench's loop → the bare Map → a native Map look-up; the loop → the garbage collector;
    // root → Node's timers → a native call (no frame of the repository on the stack).
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 }, children: [2, 5, 6, 7] },
        { id: 2, callFrame: { functionName: 'run', url: at('bench/fixtures.ts'), lineNumber: 130 }, children: [3] },
        { id: 3, callFrame: { functionName: 'claim', url: at('bench/bare-map.ts'), lineNumber: 15 }, children: [4] },
        { id: 4, callFrame: { functionName: 'MapPrototypeHas', url: '', lineNumber: -1 } },
        { id: 5, callFrame: { functionName: '(garbage collector)', url: '', lineNumber: -1 } },
        { id: 6, callFrame: { functionName: '(idle)', url: '', lineNumber: -1 } },
        { id: 7, callFrame: { functionName: 'processTimers', url: 'node:internal/timers', lineNumber: 500 }, children: [8] },
        { id: 8, callFrame: { functionName: 'getLibuvNow', url: '', lineNumber: -1 } },
      ],
      samples: [4, 3, 2, 5, 6, 8, 4],
      timeDeltas: [0, 10, 20, 30, 40, 50, 60],
    };
    const into = emptyPairProfile();
    addSamples(into, profile, CLAIM_PARTS);
    // A sample's time is the delta to the next one; the idle sample is left out, the last has none.
    expect(into.busyMicros).toBe(10 + 20 + 30 + 40 + 60 + 0);
    expect(into.parts.get("Node's node:internal/timers, called from neither the package nor the bench")).toBe(60);
    expect(into.parts.get('the bare Map')).toBe(10 + 20);
    expect(into.parts.get("the bench's loop (each call awaited, the result kept)")).toBe(30);
    expect(into.parts.get('garbage collector')).toBe(40);
    expect(into.functions.get('claim bench/bare-map.ts')).toBe(30);
    expect(() => addSamples(emptyPairProfile(), { nodes: [], samples: [7], timeDeltas: [0] }, CLAIM_PARTS)).toThrow(/node 7/);
  });

  it("names Node's work below a frame of the repository apart, by the first of the named parts any frame below matches", () => {
    const at = (file: string) => `file://${root}/${file}`;
    // The hand-written check → subtle.sign → jobPromise → the job's constructor (Node's crypto) or the native run;
    // the hand-written check → subtle.sign → normalizeAlgorithm; the hand-written check itself.
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: { functionName: 'handWrittenWebCryptoVerify', url: at('bench/fixtures.ts'), lineNumber: 194 }, children: [2] },
        { id: 2, callFrame: { functionName: 'sign', url: 'node:internal/crypto/webcrypto', lineNumber: 1 }, children: [3, 6] },
        { id: 3, callFrame: { functionName: 'jobPromise', url: 'node:internal/crypto/util', lineNumber: 1 }, children: [4, 5] },
        { id: 4, callFrame: { functionName: '', url: 'node:internal/crypto/mac', lineNumber: 1 } },
        { id: 5, callFrame: { functionName: 'run', url: '', lineNumber: -1 } },
        { id: 6, callFrame: { functionName: 'normalizeAlgorithm', url: 'node:internal/crypto/util', lineNumber: 1 } },
      ],
      samples: [4, 5, 6, 1, 1],
      timeDeltas: [0, 1, 2, 3, 4],
    };
    const into = emptyPairProfile();
    addSamples(into, profile, WEBCRYPTO_PARTS, WEBCRYPTO_NODE_PARTS);
    expect(into.parts.get(WEBCRYPTO_NODE_PARTS[0]!.name)).toBe(1 + 2);
    expect(into.parts.get(WEBCRYPTO_NODE_PARTS[1]!.name)).toBe(3);
    expect(into.parts.get('the hand-written check: headers, window, join into a reused buffer, `subtle.sign`')).toBe(4);
    // Every one of them is still the hand-written check's, by function.
    expect(into.functions.get('handWrittenWebCryptoVerify bench/fixtures.ts')).toBe(1 + 2 + 3 + 4);
  });
});

/** Rows of a report's tables by their first cell (the first row of that name). */
function rowsOf(stdout: string): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const row of stdout.split('\n').filter((l) => l.startsWith('| ')).map((l) => l.slice(2, -2).split(' | '))) {
    if (!rows.has(row[0]!)) rows.set(row[0]!, row.slice(1));
  }
  return rows;
}

/**
 * A pair's report: its columns, every sample in a named part (none "elsewhere"), each column's
 * parts summing to its sampled time, and the main thread's CPU time; `named(prefix)` gives a part's row.
 */
function checkPairReport(stdout: string, columns: readonly string[]): (prefix: string) => number[] {
  const rows = rowsOf(stdout);
  expect(rows.get('µs per call')?.slice(0, 2)).toEqual(columns);
  // The parts: every row of the first table but its header, its rule and its totals (the function tables' rows start with a figure).
  const parts = [...rows].filter(([name]) => !name.startsWith('µs') && !name.startsWith('---') && !name.startsWith('**') && !/^\d/.test(name));
  expect(parts.map(([name]) => name).filter((name) => name.startsWith('elsewhere'))).toEqual([]);
  const total = rows.get('**sampled time per call**')!;
  for (const column of [0, 1]) {
    const sum = parts.reduce((a, [, cells]) => a + Number(cells[column]), 0);
    expect(Math.abs(sum - Number(total[column]))).toBeLessThanOrEqual(0.005 * parts.length + 0.01);
  }
  expect(total[3]).toMatch(/^ratio \d+\.\d\d$/);
  const cpu = rows.get('**main thread CPU time per call (user + system)**')!;
  expect(Number(cpu[0])).toBeGreaterThan(0);
  expect(Number(cpu[1])).toBeGreaterThan(0);
  // The heap bytes each call allocates, where this Node counts them (it runs the report's line).
  const bytes = rows.get('**bytes allocated on the heap per call**');
  if ('total_allocated_bytes' in getHeapStatistics()) {
    expect(Number(bytes?.[0])).toBeGreaterThan(0);
    expect(Number(bytes?.[1])).toBeGreaterThan(0);
  } else {
    expect(bytes).toBeUndefined();
  }
  return (prefix) => {
    const row = parts.find(([name]) => name.startsWith(prefix));
    expect(row, prefix).toBeDefined();
    return row![1].slice(0, 2).map(Number);
  };
}

describe('npm run bench:profile:pair', () => {
  it("profiles section 11's claim + complete beside its floor, each sample given to a named part", { timeout: TIME_LIMIT_MS }, async () => {
    const { code, stdout, stderr } = await profileCommand(['claim', '--seconds', '1', '--max', '2000', '--top', '5'], 'bench/profile-pair.ts');
    expect(code, stderr).toBe(0);
    expect(stdout).toContain(`Node ${process.versions.node}; the stores full to 2,000 ids`);
    const named = checkPairReport(stdout, ['claim + complete', 'verify + a bare Map: look up, forget the oldest, insert, mark done']);
    // The store and the claim protocol are ours alone; the bare Map the floor's alone; both verify.
    for (const prefix of ["the store's record", 'the claim protocol', 'renewal, cancellation']) {
      expect(named(prefix)[0], prefix).toBeGreaterThan(0);
      expect(named(prefix)[1], prefix).toBe(0);
    }
    expect(named('the bare Map')).toEqual([0, expect.any(Number)]);
    expect(named('the bare Map')[1]).toBeGreaterThan(0);
    expect(named('verification')[0]).toBeGreaterThan(0);
    expect(named('verification')[1]).toBeGreaterThan(0);
  });

  it("profiles section 3's WebCrypto verifier beside the hand-written check, 64 in flight", { timeout: TIME_LIMIT_MS }, async () => {
    const { code, stdout, stderr } = await profileCommand(['webcrypto', '--seconds', '1', '--top', '5'], 'bench/profile-pair.ts');
    expect(code, stderr).toBe(0);
    expect(stdout).toContain(`Node ${process.versions.node}; 1 KiB, 64 calls in flight`);
    const named = checkPairReport(stdout, ['ours, WebCrypto forced', 'hand-written WebCrypto check']);
    expect(named('the HMAC through `crypto.subtle`')[0]).toBeGreaterThan(0);
    expect(named('the HMAC through `crypto.subtle`')[1]).toBe(0);
    expect(named('the hand-written check')[0]).toBe(0);
    expect(named('the hand-written check')[1]).toBeGreaterThan(0);
    // Node's hand-off of each sign to its thread pool is named apart, in both columns.
    for (const cost of named("Node's WebCrypto, both alike: the job handed to the thread pool")) expect(cost).toBeGreaterThan(0);
  });

  it('refuses a pair it does not know, and a --seconds that is not a whole number above 0', { timeout: TIME_LIMIT_MS }, async () => {
    const unknown = await profileCommand(['http'], 'bench/profile-pair.ts');
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('name one pair to profile, one of claim, webcrypto; got "http"');
    const seconds = await profileCommand(['claim', '--seconds', '0.5'], 'bench/profile-pair.ts');
    expect(seconds.code).not.toBe(0);
    expect(seconds.stderr).toContain('--seconds takes a whole number above 0; got "0.5"');
  });
});
