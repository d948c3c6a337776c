/**
 * `webhook-receiver relay pull` through the real command, against the emulator and a real local
 * HTTP endpoint that verifies what it is sent; and `relay rotate` when the secret cannot be
 * written after the rotation. No output of any run may hold the API key.
 */

import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { relayEmulator, type RelayEmulator } from '../../src/testing/index.ts';
import { verifyWebhook } from '../../src/verify.ts';
import { SECRET } from '../testing/support.ts';
import { cliArgs } from '../support/cli-entry.ts';
import { root, run, type Result } from '../cli/support.ts';
import { KEY, expectNoKeyShown, record, tinyServer } from './support.ts';

let emulator: RelayEmulator;
let dir: string;

/** What the endpoint received: each request's headers and body, and how it answered. */
interface Received {
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  verified: boolean;
}

let received: Received[];
let answer: (index: number) => number;
let endpoint: Awaited<ReturnType<typeof tinyServer>>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relay-pull-'));
  endpoint = await tinyServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = req.headers;
      void verifyWebhook({ headers, body }, { secrets: SECRET, unsigned: 'accept' }).then(
        (webhook) => webhook.signed,
        () => false,
      ).then((verified) => {
        const index = received.push({ headers, body, verified }) - 1;
        res.writeHead(answer(index), { 'content-type': 'application/json' });
        res.end('{}');
      });
    });
  });
});

beforeEach(async () => {
  emulator = await relayEmulator({ apiKeys: [{ key: KEY }] });
  received = [];
  answer = () => 204;
});

afterEach(async () => {
  await emulator.close();
});

afterAll(async () => {
  await endpoint.close();
  await rm(dir, { recursive: true, force: true });
  expectNoKeyShown();
});

async function cli(args: string[], env: Record<string, string> = {}): Promise<Result> {
  const result = await run(args, { env: { RELAY_URL: emulator.url, RELAY_API_KEY: KEY, WEBHOOK_SECRET: SECRET, ...env }, timeoutMs: 120_000 });
  record(result.stdout);
  record(result.stderr);
  expect(result.stdout + result.stderr).not.toContain(KEY);
  return result;
}

/**
 * `relay pull` left running (without --once), as a person runs it: `waitFor` resolves once its
 * output passes a check, `stop` kills it whatever happened. It is killed after 150 s regardless.
 */
function pulling(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [...cliArgs(), 'relay', 'pull', ...args], {
    cwd: root,
    env: { ...process.env, RELAY_URL: emulator.url, RELAY_API_KEY: KEY, WEBHOOK_SECRET: SECRET, ...env },
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 150_000);
  let stdout = '';
  let stderr = '';
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const waiter of waiters) waiter();
  };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => ((stdout += chunk), wake()));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => ((stderr += chunk), wake()));
  const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
  return {
    exit,
    kill: (signal: NodeJS.Signals) => child.kill(signal),
    output: () => ({ stdout, stderr }),
    waitFor: (check: (stdout: string, stderr: string) => boolean) =>
      new Promise<void>((resolve) => {
        const test = () => {
          if (!check(stdout, stderr)) return;
          waiters.delete(test);
          resolve();
        };
        waiters.add(test);
        test();
      }),
    stop: () => {
      clearTimeout(killer);
      child.kill('SIGKILL');
    },
  };
}

describe('relay pull', () => {
  it('without --once keeps pulling, sends an event added while it runs, and stops on Ctrl-C with its cursor saved', { timeout: 180_000 }, async () => {
    emulator.addEvent({ body: '{"type":"first"}' });
    const triggerId = emulator.addTrigger();
    const cursorFile = join(dir, 'live.cursor');
    const child = pulling(['--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--cursor', cursorFile]);
    const sentLines = (count: number) => child.waitFor((stdout) => (stdout.match(/: 204 /g) ?? []).length >= count);
    try {
      await sentLines(1);
      expect(child.output().stdout).toContain('Ctrl-C to stop');
      // An event captured while the loop runs reaches the endpoint without a restart.
      emulator.addEvent({ body: '{"type":"second"}' });
      await sentLines(2);
      child.kill('SIGINT');
      expect(await child.exit).toBe(0);
    } finally {
      child.stop();
    }
    const { stdout, stderr } = child.output();
    record(stdout);
    record(stderr);
    expect(stdout + stderr).not.toContain(KEY);
    expect(stdout).toMatch(/stopped: 2 events sent and answered 2xx/);
    expect(received.map((request) => request.body.toString())).toEqual(['{"type":"first"}', '{"type":"second"}']);
    expect(received.every((request) => request.verified)).toBe(true);
    expect(existsSync(cursorFile)).toBe(true);
  });

  it('without --once sends a batch the endpoint refused again after a backoff, and still ends at a misuse (exit 2)', { timeout: 180_000 }, async () => {
    const refused = emulator.addEvent({ body: '{"n":1}' });
    const triggerId = emulator.addTrigger();
    answer = (index) => (index === 0 ? 503 : 204);
    const child = pulling(['--trigger', triggerId, '--to', `${endpoint.url}/webhooks`]);
    try {
      await child.waitFor((stdout) => / 204 /.test(stdout));
      child.kill('SIGINT');
      expect(await child.exit).toBe(0);
    } finally {
      child.stop();
    }
    const { stdout, stderr } = child.output();
    record(stdout);
    record(stderr);
    expect(stderr).toMatch(new RegExp(`^webhook-receiver relay pull: event ${refused.id} was answered 503; trying this batch again in 1 s$`, 'm'));
    expect(received.map((request) => [request.headers['webhook-id'], request.verified])).toEqual([
      [refused.id, true],
      [refused.id, true],
    ]);
    expect(stdout).toMatch(/stopped: 1 event sent and answered 2xx/);

    // An event whose method the relay did not record is a misuse the loop meets: the command ends.
    emulator.addEvent({ body: '{"old":true}', method: null });
    const misuse = pulling(['--trigger', emulator.addTrigger(), '--to', `${endpoint.url}/webhooks`]);
    try {
      expect(await misuse.exit).toBe(2);
    } finally {
      misuse.stop();
    }
    record(misuse.output().stderr);
    expect(misuse.output().stderr).toMatch(/--method/);
    // A new trigger reads from the start: the first event once more, the one after it never.
    expect(received.map((request) => request.headers['webhook-id'])).toEqual([refused.id, refused.id, refused.id]);
  });

  it('--once sends each event signed with the local secret, unattempted unsigned, failed never, and resumes from --cursor', { timeout: 180_000 }, async () => {
    const signed = emulator.addEvent({
      body: '{"type":"invoice.paid"}',
      headers: [
        ['content-type', 'application/json'],
        ['authorization', 'Bearer sender-token-xyz'],
        ['webhook-id', 'msg_sender_1'],
        ['webhook-signature', 'v1,b2xkIHNpZ25hdHVyZQ=='],
        ['x-custom', 'kept'],
      ],
    });
    const unattempted = emulator.addEvent({ body: '{"type":"unsigned"}', verificationState: 'unattempted' });
    const failed = emulator.addEvent({ body: '{"type":"forged"}', verificationState: 'failed' });
    const triggerId = emulator.addTrigger();
    const cursorFile = join(dir, 'once.cursor');

    const first = await cli(['relay', 'pull', '--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--cursor', cursorFile, '--once']);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(received).toHaveLength(2);
    const [one, two] = received as [Received, Received];
    expect(one.verified).toBe(true);
    expect(one.headers['webhook-id']).toBe('msg_sender_1');
    expect(one.headers.authorization).toBeUndefined();
    expect(String(one.headers['webhook-signature'])).not.toContain('b2xkIHNpZ25hdHVyZQ==');
    expect(one.headers['x-custom']).toBe('kept');
    expect(one.body.toString()).toBe('{"type":"invoice.paid"}');
    expect(two.headers['webhook-signature']).toBeUndefined();
    expect(two.headers['webhook-id']).toBe(unattempted.id);
    expect(two.body.toString()).toBe('{"type":"unsigned"}');
    // One line per event, the skipped one said so.
    const lines = first.stdout.split('\n').filter((line) => line.startsWith('#'));
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(new RegExp(`^#1 \\S+ event ${signed.id} \\(verified\\) POST webhook-id "msg_sender_1", signed, 23 bytes: 204 in \\d+ ms$`));
    expect(lines[1]).toMatch(/\(unattempted\) POST .* unsigned, .*: 204/);
    expect(lines[2]).toContain(`event ${failed.id} (failed): skipped`);
    expect(first.stdout).toMatch(/caught up: 2 events sent and answered 2xx/);
    expect(existsSync(cursorFile)).toBe(true);
    // The bodies come with each event's documents, not a second time inline in the wait.
    const waits = emulator.requests.filter((request) => request.path.endsWith('/wait'));
    expect(waits.length).toBeGreaterThan(0);
    expect(waits.every((request) => request.query.some(([name, value]) => name === 'inlineBodies' && value === 'false'))).toBe(true);

    // Again from the cursor: nothing new, nothing sent.
    const again = await cli(['relay', 'pull', '--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--cursor', cursorFile, '--once']);
    expect(again.code).toBe(0);
    expect(received).toHaveLength(2);
    expect(again.stdout).toMatch(/caught up: 0 events/);
  });

  it('never moves the cursor past an event the endpoint did not answer 2xx; the next pull sends the batch again, same ids', { timeout: 180_000 }, async () => {
    const a = emulator.addEvent({ body: '{"n":1}' });
    const b = emulator.addEvent({ body: '{"n":2}' });
    const triggerId = emulator.addTrigger();
    const cursorFile = join(dir, 'failing.cursor');
    answer = (index) => (index === 1 ? 500 : 204);
    const failing = await cli(['relay', 'pull', '--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--cursor', cursorFile, '--once']);
    expect(failing.code).toBe(1);
    expect(failing.stderr).toMatch(new RegExp(`stopped: event ${b.id} was answered 500`));
    expect(existsSync(cursorFile)).toBe(false);
    expect(received.map((request) => request.headers['webhook-id'])).toEqual([a.id, b.id]);

    answer = () => 204;
    const healed = await cli(['relay', 'pull', '--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--cursor', cursorFile, '--once']);
    expect(healed.code).toBe(0);
    // The first event again, with the same webhook-id: the endpoint's claims answer it as a duplicate.
    expect(received.map((request) => request.headers['webhook-id'])).toEqual([a.id, b.id, a.id, b.id]);
    expect(readFileSync(cursorFile, 'utf8').trim()).not.toBe('');
  });

  it('refuses an event whose method was not recorded unless --method says which, and misuse before anything is pulled', { timeout: 180_000 }, async () => {
    emulator.addEvent({ body: '{"old":true}', method: null });
    const triggerId = emulator.addTrigger();
    const refused = await cli(['relay', 'pull', '--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--once']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--method/);
    expect(received).toEqual([]);
    const told = await cli(['relay', 'pull', '--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--once', '--method', 'PUT']);
    expect(told.code).toBe(0);
    expect(received).toHaveLength(1);

    const help = await cli(['relay', 'pull', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: webhook-receiver relay pull --trigger UUID --to URL/);

    const noSecret = await cli(['relay', 'pull', '--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--once'], { WEBHOOK_SECRET: '' });
    expect(noSecret.code).toBe(2);
    const keyOption = await cli(['relay', 'pull', '--trigger', triggerId, '--to', `${endpoint.url}/webhooks`, '--api-key', KEY]);
    expect(keyOption.code).toBe(2);
    const remote = await cli(['relay', 'pull', '--trigger', triggerId, '--to', 'https://example.com/webhooks', '--once']);
    expect(remote.code).toBe(2);
    expect(remote.stderr).toMatch(/--yes/);
    expect(received).toHaveLength(1);
  });
});

describe('relay rotate', () => {
  it('prints the secret once, on stderr with the warning, when the file cannot be placed after the rotation', { timeout: 120_000 }, async () => {
    const { destination } = emulator.addDestination({ url: 'https://app.example.com/hooks' });
    // --force writes beside the target and renames over it: a folder in the way makes the rename fail.
    const occupied = join(dir, 'occupied');
    mkdirSync(occupied);
    writeFileSync(join(occupied, 'keep'), 'x');
    const result = await cli(['relay', 'rotate', '--destination', destination.id, '--out', occupied, '--force']);
    expect(result.code).toBe(1);
    const [newest] = emulator.signingSecrets(destination.id);
    const secret = newest!.secret;
    expect(result.stderr).toMatch(/WARNING: the rotation happened but the secret could not be written/);
    expect(result.stderr.split(secret).length - 1).toBe(1);
    expect(result.stdout).not.toContain(secret);
    // Nowhere else: no half-placed copy left beside the target.
    expect(readdirSync(dir).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    expect(readdirSync(occupied)).toEqual(['keep']);
  });
});
