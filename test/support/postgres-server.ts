/**
 * A real PostgreSQL server for tests: a throw-away cluster made with `initdb` in a temporary
 * directory, started with `pg_ctl` on a free loopback port, trust authentication, stopped (and its
 * directory removed) at the end. `initdb` refuses to run as root, so as root the cluster belongs to
 * the `postgres` system user that Debian's package creates. No vitest import here: the global
 * setup uses it too.
 */

import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, chmodSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort, isCI } from './redis-server.ts';

export { isCI };

const HOST = '127.0.0.1';

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The folder holding `initdb`, `pg_ctl` and `postgres`: on the PATH, or Debian's versioned folder. */
export function findPostgresBin(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && executable(join(dir, 'initdb')) && executable(join(dir, 'pg_ctl'))) return dir;
  }
  // Overridable so a test can see what happens on a machine without PostgreSQL.
  const debian = process.env.WEBHOOK_RECEIVER_POSTGRES_VERSIONS_DIR ?? '/usr/lib/postgresql';
  if (!existsSync(debian)) return undefined;
  const versions = readdirSync(debian)
    .filter((name) => /^\d+$/.test(name))
    .sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const dir = join(debian, version, 'bin');
    if (executable(join(dir, 'initdb')) && executable(join(dir, 'pg_ctl'))) return dir;
  }
  return undefined;
}

/** A running throw-away cluster. */
export interface PostgresServer {
  readonly url: string;
  readonly port: number;
  /** The postmaster's process id. */
  readonly pid: number;
  /** Stops the server (fast shutdown: clients are cut off) and starts it again on the same port, with its data. */
  restart(): Promise<void>;
  /** Stops the server (fast shutdown, by its pid) and removes its directory. */
  close(): Promise<void>;
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

/** Runs a server program, as the `postgres` user when we are root. */
function runPg(bin: string, program: string, args: string[]): string {
  const path = join(bin, program);
  const [command, commandArgs] = isRoot() ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
  return execFileSync(command, commandArgs, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
}

/** Running postmasters (pid) and their directories, stopped and removed if the process exits first. */
const servers = new Map<number, string>();
process.once('exit', () => {
  for (const [pid, dir] of servers) {
    try {
      process.kill(pid, 'SIGQUIT');
    } catch {
      // already gone
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Makes and starts a cluster. Throws when the server programs are missing. */
export async function startPostgresServer(): Promise<PostgresServer> {
  const bin = findPostgresBin();
  if (bin === undefined) throw new Error('PostgreSQL server programs (initdb, pg_ctl) not found');
  const dir = mkdtempSync(join(tmpdir(), 'webhook-receiver-pg-'));
  // The postgres user must be able to write the cluster and the socket beside it.
  chmodSync(dir, 0o777);
  const data = join(dir, 'data');
  try {
    runPg(bin, 'initdb', ['-D', data, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--no-sync', '--no-instructions']);
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      try {
        // fsync off: a test cluster never outlives its machine, and every commit is faster.
        const settings = `-c listen_addresses=${HOST} -p ${port} -k ${dir} -c fsync=off -c max_connections=300 -c shared_buffers=32MB`;
        runPg(bin, 'pg_ctl', ['-D', data, '-o', settings, '-l', join(dir, 'log'), '-w', '-t', '30', 'start']);
        const postmaster = () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
        let pid = postmaster();
        servers.set(pid, dir);
        return {
          url: `postgres://postgres@${HOST}:${port}/postgres`,
          port,
          get pid() {
            return pid;
          },
          async restart() {
            runPg(bin, 'pg_ctl', ['-D', data, '-o', settings, '-l', join(dir, 'log'), '-m', 'fast', '-w', '-t', '30', 'restart']);
            servers.delete(pid);
            pid = postmaster();
            servers.set(pid, dir);
          },
          async close() {
            servers.delete(pid);
            try {
              runPg(bin, 'pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '30', 'stop']);
            } catch {
              // pg_ctl could not stop it: kill the postmaster by its pid.
              spawnSync('kill', ['-QUIT', String(pid)]);
            }
            rmSync(dir, { recursive: true, force: true });
          },
        };
      } catch (error) {
        if (attempt >= 3) throw error;
      }
    }
  } catch (error) {
    const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8').slice(-2000) : '';
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`could not start a PostgreSQL test server: ${error instanceof Error ? error.message : String(error)}\n${log}`);
  }
}
