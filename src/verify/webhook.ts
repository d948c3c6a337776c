/**
 * The webhook a verifier hands back: its fields, and the body as text or JSON (parsed once,
 * validated by a schema when one is given). Also rebuilt, unchecked, from what an inbox recorded.
 */

import { utf8Decoder } from '../lib/encoding.ts';
import { usePayload, validatedPayload, type StandardSchemaV1 } from '../schema.ts';
import type { VerifiedWebhook } from './types.ts';

/** `json()` without a schema: the parsed payload as it is. */
const asIs = (payload: unknown): unknown => payload;

/** A verified (or accepted unsigned) webhook. Internal: the verifier builds it. */
export class Webhook implements VerifiedWebhook {
  #text: string | undefined;
  // Own properties only on a pulled event: a delivery received over HTTP looks as it always did.
  declare readonly verificationState?: 'verified' | 'authenticated' | 'unattempted';
  declare readonly relayEventId?: string;
  constructor(
    readonly id: string,
    readonly timestamp: Date,
    readonly body: Uint8Array,
    readonly signed: boolean,
    readonly scheme: 'v1' | 'v1a' | 'relay' | undefined,
    readonly keyIndex: number | undefined,
    readonly keyId: string | undefined,
    readonly tenant: string | undefined,
    verificationState?: 'verified' | 'authenticated' | 'unattempted',
    relayEventId?: string,
  ) {
    if (verificationState !== undefined) (this as { verificationState?: string }).verificationState = verificationState;
    if (relayEventId !== undefined) (this as { relayEventId?: string }).relayEventId = relayEventId;
  }
  text(): string {
    return (this.#text ??= utf8Decoder.decode(this.body));
  }
  json<T = unknown>(): T;
  json<S extends StandardSchemaV1>(schema: S): StandardSchemaV1.InferOutput<S>;
  json(schema?: StandardSchemaV1): unknown {
    if (schema === undefined) return usePayload(this, asIs);
    return validatedPayload(this, schema, 'webhook.json(schema)', { sync: true });
  }
  parse<S extends StandardSchemaV1>(schema: S): Promise<StandardSchemaV1.InferOutput<S>> {
    return validatedPayload(this, schema, 'webhook.parse(schema)', { sync: false });
  }
}

/**
 * A verified webhook rebuilt from what was recorded when it was verified (an inbox job): the same
 * object, with the same methods, that the synchronous mode hands a handler. Internal: the inbox's
 * worker uses it; it checks nothing, so only data this package wrote after verifying may reach it.
 */
export function rebuiltWebhook(fields: {
  id: string;
  timestamp: Date;
  body: Uint8Array;
  signed: boolean;
  scheme: 'v1' | 'v1a' | 'relay' | undefined;
  keyIndex: number | undefined;
  keyId: string | undefined;
  tenant: string | undefined;
  verificationState?: 'verified' | 'authenticated' | 'unattempted' | undefined;
  relayEventId?: string | undefined;
}): VerifiedWebhook {
  return new Webhook(fields.id, fields.timestamp, fields.body, fields.signed, fields.scheme, fields.keyIndex, fields.keyId, fields.tenant, fields.verificationState, fields.relayEventId);
}
