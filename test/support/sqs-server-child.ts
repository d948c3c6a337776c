/**
 * fauxqs in a process of its own (`node --import tsx`), for a test whose own process is busy: on
 * `FAUXQS_PORT` (0: a free one) of 127.0.0.1, its state in memory, or with `FAUXQS_DATA_DIR` in that
 * folder, so that a child started again on it finds the queues and messages (with the correction of
 * fauxqs-persistence.ts). Reports `{ port }`
 * over IPC once it listens; creates the queues it is sent (`{ create: { name, attributes } }`,
 * answered with what `createQueue` returns); stops on SIGTERM.
 */

import { startFauxqs } from 'fauxqs';
import { keepReceiveCountOnRelease } from './fauxqs-persistence.ts';

const dataDir = process.env.FAUXQS_DATA_DIR;
if (dataDir !== undefined) await keepReceiveCountOnRelease();
const server = await startFauxqs({ port: Number(process.env.FAUXQS_PORT ?? 0), host: '127.0.0.1', logger: false, ...(dataDir === undefined ? {} : { dataDir }) });
process.on('message', (message: { create?: { name: string; attributes: Record<string, string> } }) => {
  if (message.create !== undefined) process.send?.({ created: server.createQueue(message.create.name, { attributes: message.create.attributes }) });
});
process.once('SIGTERM', () => {
  void server.stop().then(() => process.exit(0));
});
process.send?.({ port: server.port });
