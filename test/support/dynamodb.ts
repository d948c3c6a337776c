/**
 * DynamoDB for tests: dynalite (the DynamoDB API on an in-memory LevelDB) started in this process
 * on 127.0.0.1, and SDK clients pointed at it. dynalite has conditional writes but no
 * `ReturnValuesOnConditionCheckFailure`, `TransactWriteItems` or `UpdateTimeToLive`.
 */

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { dynamoStore, type DynamoClientLike, type DynamoStore, type DynamoStoreOptions } from '../../src/stores/dynamodb.ts';

// dynalite is CommonJS without types: a function that makes an http.Server.
const dynalite = createRequire(import.meta.url)('dynalite') as (options: { createTableMs?: number; deleteTableMs?: number; updateTableMs?: number }) => Server;

/** A local DynamoDB endpoint. */
export interface Dynalite {
  readonly endpoint: string;
  /** A client of the endpoint (region and dummy credentials, as the SDK needs even locally). */
  client(config?: DynamoDBClientConfig): DynamoDBClient;
  /** A table of its own (created through the store's `setup`), and a store factory on it. */
  table(name?: string): Promise<{ table: string; open(options?: Omit<DynamoStoreOptions, 'client' | 'table'>, client?: DynamoClientLike): DynamoStore }>;
  close(): Promise<void>;
}

let tables = 0;

/** The SDK settings for a local endpoint. */
export const localConfig = (endpoint: string): DynamoDBClientConfig => ({ endpoint, region: 'local', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });

export async function startDynalite(): Promise<Dynalite> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clients: DynamoDBClient[] = [];
  const client = (config: DynamoDBClientConfig = {}): DynamoDBClient => {
    const made = new DynamoDBClient({ ...localConfig(endpoint), ...config });
    clients.push(made);
    return made;
  };
  const shared = client();
  return {
    endpoint,
    client,
    async table(name = `claims-${process.pid}-${++tables}`) {
      await dynamoStore({ client: shared, table: name }).setup();
      return { table: name, open: (options = {}, own: DynamoClientLike = shared) => dynamoStore({ ...options, client: own, table: name }) };
    },
    async close() {
      for (const made of clients) made.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
