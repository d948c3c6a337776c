/**
 * The OpenAPI 3.1 description the relay emulator serves at `/openapi.json`: the operations it
 * implements, with query parameter names that a test may change, so that a client reading the
 * description is tested against names other than the defaults.
 */

/**
 * Wire names of the emulator's query parameters. The relay's API document gives only `limit`;
 * the defaults here are the emulator's choice, and a test changes them to check that a client
 * reads them from `/openapi.json` instead of assuming them.
 *
 * @example
 * ```ts
 * import { relayEmulator, type RelayEmulatorQueryNames } from 'webhook-receiver/testing';
 * const names: RelayEmulatorQueryNames = { cursor: 'after', status: 'state', statusExplode: false };
 * const relay = await relayEmulator({ queryNames: names });
 * ```
 */
export interface RelayEmulatorQueryNames {
  /** Default `cursor`. */
  cursor?: string;
  /** Default `destinationId`. */
  destination?: string;
  /** Default `subscriptionId`. */
  subscription?: string;
  /** Default `status`. */
  status?: string;
  /** Whether the status list is one parameter per status (`true`, default) or one joined by commas. */
  statusExplode?: boolean;
  /** The trigger wait's inline-body switch. Default `inlineBodies`. */
  inlineBodies?: string;
  /** The trigger wait's per-event inline byte cap. Default `maxInlineBytes`. */
  maxInlineBytes?: string;
}

/** The names in force: the defaults with the test's changes. */
export type ResolvedEmulatorNames = Required<RelayEmulatorQueryNames>;

export function emulatorNames(names: RelayEmulatorQueryNames = {}): ResolvedEmulatorNames {
  return {
    cursor: names.cursor ?? 'cursor',
    destination: names.destination ?? 'destinationId',
    subscription: names.subscription ?? 'subscriptionId',
    status: names.status ?? 'status',
    statusExplode: names.statusExplode ?? true,
    inlineBodies: names.inlineBodies ?? 'inlineBodies',
    maxInlineBytes: names.maxInlineBytes ?? 'maxInlineBytes',
  };
}

const uuid = { type: 'string', format: 'uuid' };
const errors = {
  '400': { $ref: '#/components/responses/Error' },
  '401': { description: 'Missing or invalid key (empty body, WWW-Authenticate)' },
  '403': { description: 'The key lacks a scope (empty body, WWW-Authenticate)' },
  '404': { $ref: '#/components/responses/Error' },
  '429': { $ref: '#/components/responses/Error' },
  '500': { description: 'Internal error (plain text)' },
};

function op(summary: string, parameters: unknown[] = []): Record<string, unknown> {
  return { summary, parameters, responses: { '200': { description: 'OK' }, ...errors } };
}

/** The description for `names`. */
export function emulatorOpenApi(names: ResolvedEmulatorNames): Record<string, unknown> {
  const pathId = (name: string) => ({ name, in: 'path', required: true, schema: uuid });
  return {
    openapi: '3.1.0',
    info: { title: 'Relay API (emulator)', version: '1.0.0' },
    paths: {
      '/v1/whoami': { get: op('Identity') },
      '/v1/events/{eventId}': { parameters: [pathId('eventId')], get: op('Get a captured event') },
      '/v1/events/{id}/payload': { parameters: [pathId('id')], get: op("Get an event's raw body") },
      '/v1/deliveries': {
        get: op('List deliveries', [
          { $ref: '#/components/parameters/Cursor' },
          { $ref: '#/components/parameters/Limit' },
          { name: names.destination, in: 'query', required: false, schema: uuid },
          { name: names.subscription, in: 'query', required: false, schema: uuid },
          {
            name: names.status,
            in: 'query',
            required: false,
            style: 'form',
            explode: names.statusExplode,
            schema: { type: 'array', items: { type: 'string', enum: ['queued', 'forwarded', 'pending', 'delivered', 'failed', 'blocked', 'dead', 'cancelled'] } },
          },
        ]),
      },
      '/v1/replay-destinations': { get: op('List replay destinations') },
      '/v1/replay-destinations/{destinationId}/signing-secret': { parameters: [pathId('destinationId')], post: op("Rotate a destination's signing secret") },
      '/v1/triggers/{triggerId}/wait': {
        parameters: [pathId('triggerId')],
        get: op('Consume next events of a trigger (short-poll)', [
          { $ref: '#/components/parameters/Cursor' },
          { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 200 } },
          { name: names.inlineBodies, in: 'query', required: false, schema: { type: 'boolean', default: true } },
          { name: names.maxInlineBytes, in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 65_536 } },
        ]),
      },
    },
    components: {
      parameters: {
        Cursor: { name: names.cursor, in: 'query', required: false, schema: { type: 'string' } },
        Limit: { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
      },
      responses: {
        Error: {
          description: 'The error envelope',
          content: { 'application/json': { schema: { type: 'object', required: ['error', 'message'], properties: { error: { type: 'string' }, message: { type: 'string' } } } } },
        },
      },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
    security: [{ bearer: [] }],
  };
}
