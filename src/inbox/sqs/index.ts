/**
 * The inbox on Amazon SQS: accept into a queue from any adapter (the Lambda adapter too), process
 * from a Lambda SQS trigger (`inbox.lambda`, with partial batch responses) or a long-running
 * worker (`inbox.work`), with dead letters on the dead-letter queue the redrive policy names.
 * `@aws-sdk/client-sqs` v3 is an optional peer: the app builds the `SQSClient`.
 *
 * Durability: a job is acknowledged once `SendMessage` answered, which SQS does only after storing
 * the message redundantly; from then SQS delivers it at least once within the queue's retention
 * (4 days by default, at most 14).
 *
 * @module webhook-receiver/sqs
 */

export type { SqsClientLike } from './client.ts';
export type { LambdaContextLike, SqsBatchResponse, SqsEventLike, SqsLambdaHandler, SqsRecordLike } from './lambda.ts';
export { sqsInbox, SQS_RETENTION_SECONDS, type SqsInbox, type SqsInboxOptions, type SqsLambdaOptions } from './inbox.ts';
