/**
 * Redis MONITOR, read on a plain socket: what the round-trip counts of the tests and the benchmark
 * watch. No test framework here, so the benchmark can use it too.
 */

import { once } from 'node:events';
import { connect } from 'node:net';

/** One line of MONITOR output: the command's arguments and who sent it (`ip:port`, or `lua`). */
export interface MonitorEvent {
  args: string[];
  source: string;
}

/**
 * Reads one MONITOR line: `+<time> [<db> <source>] "arg" "arg" …`, each argument quoted with
 * backslash escapes (`\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`, `\xhh`). `undefined` for
 * anything else.
 */
export function parseMonitorLine(line: string): MonitorEvent | undefined {
  const open = line.indexOf(' [');
  const close = line.indexOf('] ', open);
  if (!line.startsWith('+') || open === -1 || close === -1) return undefined;
  const where = line.slice(open + 2, close);
  const source = where.slice(where.indexOf(' ') + 1);
  const args: string[] = [];
  const escapes: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '"': '"', '\\': '\\' };
  let i = close + 2;
  while (i < line.length) {
    if (line[i] === ' ') {
      i++;
      continue;
    }
    if (line[i] !== '"') return undefined;
    let arg = '';
    for (i++; i < line.length && line[i] !== '"'; i++) {
      if (line[i] !== '\\') {
        arg += line[i];
      } else if (line[i + 1] === 'x') {
        arg += String.fromCharCode(Number.parseInt(line.slice(i + 2, i + 4), 16));
        i += 3;
      } else {
        arg += escapes[line[i + 1]!] ?? line[i + 1];
        i++;
      }
    }
    if (line[i] !== '"') return undefined;
    args.push(arg);
    i++;
  }
  return { args, source };
}

/**
 * MONITOR on a connection of its own, read by hand. ioredis' monitor mode is not used: when other
 * clients are busy on the server, a line that arrives right after MONITOR's `+OK` can be taken
 * for the reply to a command, and ioredis throws "Command queue state error" (seen under load,
 * with other test files using the same server).
 */
export async function openMonitor(url: string, onEvent: (event: MonitorEvent) => void): Promise<{ close(): void }> {
  const { hostname, port, username, password } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port || 6379) });
  await once(socket, 'connect');
  const expected = password ? 2 : 1;
  if (password) socket.write(`AUTH ${username ? `${decodeURIComponent(username)} ` : ''}${decodeURIComponent(password)}\r\n`);
  socket.write('MONITOR\r\n');
  let buffered = '';
  let answered = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('latin1');
        for (let end = buffered.indexOf('\r\n'); end !== -1; end = buffered.indexOf('\r\n')) {
          const line = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          if (answered < expected) {
            if (line !== '+OK') reject(new Error(`MONITOR was refused: ${line}`));
            else if (++answered === expected) resolve();
            continue;
          }
          const event = parseMonitorLine(line);
          if (event !== undefined) onEvent(event);
        }
      });
    });
  } catch (error) {
    socket.destroy();
    throw error;
  }
  // A later failure (the server stopped) ends the stream of events; the caller's wait for them
  // times out with its own message, rather than the process failing on an unhandled 'error'.
  socket.on('error', () => undefined);
  return { close: () => socket.destroy() };
}
