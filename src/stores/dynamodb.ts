/**
 * The DynamoDB idempotency store: `webhook-receiver/dynamodb`.
 *
 * One table, one item per key, partition key `pk`. Every operation is one conditional write whose
 * condition says "absent or expired" (claim) or "held by this token" (complete, release, extend):
 * atomic without transactions, one request. A failed condition is an answer, not an error: the
 * claim then needs the old item to tell `processing` from `completed`, which DynamoDB returns with
 * the failure (`ReturnValuesOnConditionCheckFailure`, no read units) and emulators such as
 * dynalite do not; without it, one consistent `GetItem` reads it.
 *
 * DynamoDB has no server clock in conditions: times come from the caller's clock, and a lock
 * counts as expired for other callers only `clockMarginMs` after its end, while its owner stops
 * at the end itself. Two callers whose clocks differ by less than the margin never both hold a
 * claim.
 *
 * The client is the application's low-level `DynamoDBClient` (`@aws-sdk/client-dynamodb`), typed by
 * shape; the SDK's command classes are imported on first use, never bundled.
 *
 * @module webhook-receiver/dynamodb
 */

export * from './dynamodb/index.ts';
