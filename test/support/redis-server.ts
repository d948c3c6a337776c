/**
 * A real `redis-server` for tests: started on a free loopback port with persistence off and its
 * own temporary directory, stopped and restarted on the same port (outage tests), always killed
 * when the process exits. No vitest import here: the global setup uses it too.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

const REDIS_HOST = '127.0.0.1';

/** True when the `CI` variable says so (`CI=false` and `CI=0` do not). */
export function isCI(): boolean {
  const ci = process.env.CI;
  return ci !== undefined && ci !== '' && ci !== 'false' && ci !== '0';
}

/** The `redis-server` executable on the PATH, if any. */
export function findRedisServer(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'redis-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Why the Redis tests cannot run and must not be skipped (`CI` set, no `REDIS_URL`, no
 * `redis-server` on the PATH), or `undefined`.
 */
export function redisMissingUnderCI(): string | undefined {
  const url = process.env.REDIS_URL;
  if ((url !== undefined && url !== '') || !isCI() || findRedisServer() !== undefined) return undefined;
  return 'redis-server is missing: it is not on the PATH and REDIS_URL is unset. CI is set, so the Redis tests may not be skipped: install redis-server (apt-get install redis-server) or set REDIS_URL=redis://host:port';
}

/** A free TCP port on the loopback interface (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, REDIS_HOST, () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Sends `PING` over a raw socket: true on `+PONG` within `timeoutMs`. */
function ping(port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: REDIS_HOST, port });
    let reply = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.once('error', () => done(false));
  });
}

export interface StartRedisOptions {
  /** A fixed port; default: a free one. */
  port?: number;
  /** More `redis-server` arguments, e.g. `['--maxmemory', '1mb']`. */
  args?: string[];
}

/** A `redis-server` child process that can be stopped and started again on the same port. */
export interface RedisServer {
  readonly host: string;
  readonly port: number;
  readonly url: string;
  readonly running: boolean;
  /** Stops the server (SIGTERM: a clean shutdown; SIGKILL: a crash) and waits for it to exit. */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  /** Starts it again on the same port (its data is gone: persistence is off). */
  start(): Promise<void>;
  /**
   * Freezes the process (SIGSTOP): connections stay open and commands wait, unanswered, until
   * {@link RedisServer.thaw}. A test of a timeout then knows its answer came from the timeout.
   */
  freeze(): void;
  /** Lets a frozen process run again (SIGCONT): the waiting commands run. */
  thaw(): void;
  /** Stops it and removes its directory. */
  close(): Promise<void>;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

const START_TIMEOUT_MS = 5000;
const STOP_TIMEOUT_MS = 5000;

class RedisServerProcess implements RedisServer {
  readonly host = REDIS_HOST;
  #child: ChildProcess | undefined;

  constructor(
    readonly port: number,
    readonly binary: string,
    readonly dir: string,
    readonly args: readonly string[],
  ) {}

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  async start(): Promise<void> {
    if (this.#child) throw new Error(`redis-server on port ${this.port} is already running`);
    const child = spawn(
      this.binary,
      // `--save ''` and `--appendonly no`: nothing is ever written to disk, and a restart starts empty.
      ['--port', String(this.port), '--bind', this.host, '--save', '', '--appendonly', 'no', '--dir', this.dir, '--daemonize', 'no', ...this.args],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.add(child);
    let output = '';
    const collect = (chunk: Buffer) => {
      if (output.length < 8192) output += chunk.toString('utf8');
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    let exited = false;
    child.once('exit', () => {
      exited = true;
      children.delete(child);
    });
    this.#child = child;

    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (exited) break;
      if (await ping(this.port, 200)) return;
      await sleep(20);
    }
    this.#child = undefined;
    child.kill('SIGKILL');
    throw new Error(`redis-server did not start on ${this.host}:${this.port}: ${exited ? 'it exited' : 'no answer to PING'}\n${output.trim()}`);
  }

  freeze(): void {
    if (!this.#child) throw new Error(`redis-server on port ${this.port} is not running`);
    this.#child.kill('SIGSTOP');
  }

  thaw(): void {
    this.#child?.kill('SIGCONT');
  }

  async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = undefined;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts a `redis-server` from the PATH on 127.0.0.1. Throws when there is none. */
export async function startRedisServer(options: StartRedisOptions = {}): Promise<RedisServer> {
  const binary = findRedisServer();
  if (!binary) throw new Error('redis-server is not on the PATH');
  const dir = mkdtempSync(join(tmpdir(), 'webhook-receiver-redis-'));
  // A free port can be taken between the check and the bind: try a few.
  for (let attempt = 1; ; attempt++) {
    const server = new RedisServerProcess(options.port ?? (await freePort()), binary, dir, options.args ?? []);
    try {
      await server.start();
      return server;
    } catch (error) {
      if (options.port !== undefined || attempt >= 3) {
        rmSync(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }
}
