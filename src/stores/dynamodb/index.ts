/** What `webhook-receiver/dynamodb` exports, gathered from the folder's files. */

export { StoreError, type StoreErrorReason } from '../types.ts';
export type { DynamoClientLike } from './client.ts';
export {
  DEFAULT_DYNAMO_CLOCK_MARGIN_MS,
  DEFAULT_DYNAMO_TIMEOUT_MS,
  DEFAULT_DYNAMO_UNSIGNED_MAX,
  DYNAMO_TTL_ATTRIBUTE,
  type DynamoStore,
  type DynamoStoreOptions,
} from './options.ts';
export { dynamoStore } from './store.ts';
export { dynamoTableDefinition } from './table.ts';
