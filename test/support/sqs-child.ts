/**
 * fauxqs in a child process (sqs-server-child.ts) for a test or a bench whose own process is busy:
 * started on 127.0.0.1 (port 0: a free one), stopped by its pid. This module loads no fauxqs
 * itself, so a process on a Node that fauxqs does not run on can import it.
 */

import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

/** A running fauxqs child: its process (to send it `{ create }` messages), its port and its stop. */
export interface SqsChild {
  child: ChildProcess;
  port: number;
  url: string;
  stop(): Promise<void>;
}

/**
 * Forks fauxqs and resolves once it listens; rejects when it exits first. With `dataDir`, its state
 * is kept in that folder, so a child started again on it (and on the same port) carries on.
 */
export async function startSqsChild(port = 0, options: { dataDir?: string } = {}): Promise<SqsChild> {
  const child = fork(join(import.meta.dirname, 'sqs-server-child.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, FAUXQS_PORT: String(port), ...(options.dataDir === undefined ? {} : { FAUXQS_DATA_DIR: options.dataDir }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const listening = await new Promise<number>((resolve, reject) => {
    child.on('message', (message: { port?: number }) => message.port !== undefined && resolve(message.port));
    child.once('exit', (code) => reject(new Error(`fauxqs exited before it listened (${code})`)));
  });
  return { child, port: listening, url: `http://127.0.0.1:${listening}`, stop: () => stopChild(child) };
}

/** SIGTERM to a child and its exit awaited; nothing when it has already exited. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
