/** What `webhook-receiver/postgres` exports, gathered from the folder's files. */

export { DEFAULT_UNSIGNED_MAX, StoreError, type ClaimHandle, type StoreErrorReason } from '../types.ts';
export { ClaimLostError } from './claim-lost-error.ts';
export type {
  PgClientLike,
  PgPoolClientLike,
  PgPoolLike,
  PgQueryConfigLike,
  PgResultLike,
  PostgresClientLike,
  PostgresJsSqlLike,
  PostgresJsTransactionLike,
  TransactionOf,
} from './client.ts';
export { setupSql } from './ddl.sql.ts';
export {
  CLEANUP_BATCH,
  CLEANUP_EVERY,
  CLEANUP_STEP,
  DEFAULT_POSTGRES_TABLE,
  DEFAULT_POSTGRES_TIMEOUT_MS,
  type PostgresStore,
  type PostgresStoreOptions,
  type TransactionContext,
} from './options.ts';
export { postgresStore } from './store.ts';
