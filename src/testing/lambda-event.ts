/**
 * The destination side of a test on AWS Lambda: a signed webhook as the event API Gateway (a REST
 * API, payload 1.0, or an HTTP API, payload 2.0) or a Lambda function URL hands the function, ready
 * for `webhook-receiver/lambda`'s handler or any other Lambda handler.
 */

import { base64Encode } from '../lib/encoding.ts';
import { signWebhook } from '../sign.ts';
import { bodyBytes, type SignedRequestInit } from './request.ts';

/**
 * Which front door the event comes through: `'rest-api'` (API Gateway REST API, payload format
 * 1.0), `'http-api'` (API Gateway HTTP API, payload format 2.0) or `'function-url'` (a Lambda
 * function URL, payload format 2.0).
 *
 * @example
 * ```ts
 * import type { LambdaEventSource } from 'webhook-receiver/testing';
 * const sources: LambdaEventSource[] = ['rest-api', 'http-api', 'function-url'];
 * ```
 */
export type LambdaEventSource = 'rest-api' | 'http-api' | 'function-url';

/**
 * What {@link signedLambdaEvent} signs, and the event it builds around it.
 *
 * @example
 * ```ts
 * import type { SignedLambdaEventInit } from 'webhook-receiver/testing';
 * const init: SignedLambdaEventInit = { source: 'rest-api', secret: 'whsec_…', body: { type: 'invoice.paid' }, path: '/webhooks' };
 * ```
 */
export interface SignedLambdaEventInit extends SignedRequestInit {
  /** Default `'http-api'`. */
  source?: LambdaEventSource;
  /** The request's path, optionally with a query string (`/webhooks?source=billing`). Default `/webhooks`. */
  path?: string;
  /**
   * Send the body base64-encoded with `isBase64Encoded: true`, as API Gateway does for binary
   * media types and function URLs for bodies that are not text. Default: only when the body is
   * not valid UTF-8 (a string could not carry it).
   */
  base64?: boolean;
  /** The route's parameters (`{ tenant: 'acme' }` for a route `/webhooks/{tenant}`). Default: none. */
  pathParameters?: Record<string, string>;
}

/**
 * A REST API's proxy event (payload format 1.0), with every field API Gateway sends: headers in the
 * sender's case in `headers` and `multiValueHeaders`. `APIGatewayProxyEvent` from
 * `@types/aws-lambda` accepts it.
 *
 * @example
 * ```ts
 * import { signedLambdaEvent, type RestApiLambdaEvent } from 'webhook-receiver/testing';
 * const event: RestApiLambdaEvent = await signedLambdaEvent({ source: 'rest-api', secret, body: { type: 'ping' } });
 * ```
 */
export interface RestApiLambdaEvent {
  resource: string;
  path: string;
  httpMethod: string;
  headers: Record<string, string>;
  multiValueHeaders: Record<string, string[]>;
  queryStringParameters: Record<string, string> | null;
  multiValueQueryStringParameters: Record<string, string[]> | null;
  pathParameters: Record<string, string> | null;
  stageVariables: Record<string, string> | null;
  requestContext: {
    accountId: string;
    apiId: string;
    authorizer: null;
    domainName: string;
    domainPrefix: string;
    extendedRequestId: string;
    httpMethod: string;
    identity: {
      accessKey: null;
      accountId: null;
      apiKey: null;
      apiKeyId: null;
      caller: null;
      clientCert: null;
      cognitoAuthenticationProvider: null;
      cognitoAuthenticationType: null;
      cognitoIdentityId: null;
      cognitoIdentityPoolId: null;
      principalOrgId: null;
      sourceIp: string;
      user: null;
      userAgent: string;
      userArn: null;
    };
    path: string;
    protocol: string;
    requestId: string;
    requestTime: string;
    requestTimeEpoch: number;
    resourceId: string;
    resourcePath: string;
    stage: string;
  };
  body: string | null;
  isBase64Encoded: boolean;
}

/**
 * An HTTP API's or a function URL's event (payload format 2.0): header names in lower case, cookies
 * apart in `cookies`. `APIGatewayProxyEventV2` and `LambdaFunctionURLEvent` from `@types/aws-lambda`
 * accept it.
 *
 * @example
 * ```ts
 * import { signedLambdaEvent, type HttpApiLambdaEvent } from 'webhook-receiver/testing';
 * const event: HttpApiLambdaEvent = await signedLambdaEvent({ source: 'function-url', secret, body: { type: 'ping' } });
 * ```
 */
export interface HttpApiLambdaEvent {
  version: '2.0';
  routeKey: string;
  rawPath: string;
  rawQueryString: string;
  cookies?: string[];
  headers: Record<string, string>;
  queryStringParameters?: Record<string, string>;
  pathParameters?: Record<string, string>;
  requestContext: {
    accountId: string;
    apiId: string;
    domainName: string;
    domainPrefix: string;
    http: { method: string; path: string; protocol: string; sourceIp: string; userAgent: string };
    requestId: string;
    routeKey: string;
    stage: string;
    time: string;
    timeEpoch: number;
  };
  body?: string;
  isBase64Encoded: boolean;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
const USER_AGENT = 'webhook-receiver-testing';
const SOURCE_IP = '127.0.0.1';
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** API Gateway's request time: `04/Mar/2026:10:15:30 +0000`. */
function requestTime(date: Date): string {
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(date.getUTCDate())}/${MONTHS[date.getUTCMonth()]}/${date.getUTCFullYear()}:${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${two(date.getUTCSeconds())} +0000`;
}

/** `Content-Type` for `content-type`: the case most HTTP clients send, which a REST API passes on. */
function titleCase(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase());
}

/** Header pairs in order; a later name replaces an earlier one whatever their case, and keeps its own case. */
function mergedHeaders(pairs: readonly (readonly [string, string])[]): [string, string][] {
  const out: [string, string][] = [];
  for (const [name, value] of pairs) {
    const at = out.findIndex(([existing]) => existing.toLowerCase() === name.toLowerCase());
    if (at >= 0) out.splice(at, 1);
    out.push([name, value]);
  }
  return out;
}

function queryOf(search: string): { raw: string; single: Record<string, string>; multi: Record<string, string[]> } | undefined {
  if (search === '') return undefined;
  const single: Record<string, string> = {};
  const multi: Record<string, string[]> = {};
  for (const [name, value] of new URLSearchParams(search)) {
    single[name] = value;
    (multi[name] ??= []).push(value);
  }
  return { raw: search, single, multi };
}

function checkedInit(init: SignedLambdaEventInit): { source: LambdaEventSource; path: string; search: string } {
  if (typeof init !== 'object' || init === null) throw new TypeError('signedLambdaEvent needs { secret, body }');
  const source = init.source ?? 'http-api';
  if (source !== 'rest-api' && source !== 'http-api' && source !== 'function-url') {
    throw new TypeError(`signedLambdaEvent's source must be 'rest-api', 'http-api' or 'function-url', got ${JSON.stringify(source)}`);
  }
  const full = init.path ?? '/webhooks';
  if (typeof full !== 'string' || !full.startsWith('/')) throw new TypeError(`signedLambdaEvent's path must start with '/', got ${JSON.stringify(full)}`);
  const query = full.indexOf('?');
  return { source, path: query < 0 ? full : full.slice(0, query), search: query < 0 ? '' : full.slice(query + 1) };
}

/**
 * A webhook signed the way a Standard Webhooks sender signs it, wrapped in the event that API
 * Gateway or a function URL hands a Lambda function: feed it to the handler of
 * `webhook-receiver/lambda` (or any Lambda handler) to test it without deploying.
 *
 * - `'rest-api'` (payload 1.0): headers keep the sender's case (`Webhook-Id`, `Content-Type`; a
 *   name in `headers` keeps the case you give it) in `headers` and, one value each, in
 *   `multiValueHeaders`; the `requestContext` of a proxy integration on stage `prod`.
 * - `'http-api'` and `'function-url'` (payload 2.0): header names in lower case, a `cookie` header
 *   in `cookies`, `rawPath`, `rawQueryString` and `requestContext.http`; an HTTP API's route key
 *   is `POST /webhooks`, a function URL's `$default`.
 * - The body is the string sent, or its base64 with `isBase64Encoded: true` (`base64`, or a body
 *   that is not UTF-8). Signature, `webhook-id` and `webhook-timestamp` are made as
 *   `signedRequest` makes them, and the extra `headers` are applied last, so a test can break one
 *   on purpose.
 *
 * @example
 * ```ts
 * import { webhookHandler } from 'webhook-receiver/lambda';
 * import { generateSecret, signedLambdaEvent } from 'webhook-receiver/testing';
 *
 * const secret = generateSecret();
 * const handler = webhookHandler({ secrets: secret }, async () => ({ statusCode: 204 }));
 * const event = await signedLambdaEvent({ source: 'rest-api', secret, body: { type: 'invoice.paid' }, id: 'msg_1' });
 * const context = { getRemainingTimeInMillis: () => 3000 };
 * expect((await handler(event, context)).statusCode).toBe(204);
 * expect(JSON.parse((await handler(event, context)).body)).toEqual({ duplicate: true });
 * ```
 */
export function signedLambdaEvent(init: SignedLambdaEventInit & { source: 'rest-api' }): Promise<RestApiLambdaEvent>;
export function signedLambdaEvent(init: SignedLambdaEventInit & { source?: 'http-api' | 'function-url' }): Promise<HttpApiLambdaEvent>;
export function signedLambdaEvent(init: SignedLambdaEventInit): Promise<RestApiLambdaEvent | HttpApiLambdaEvent>;
export async function signedLambdaEvent(init: SignedLambdaEventInit): Promise<RestApiLambdaEvent | HttpApiLambdaEvent> {
  const { source, path, search } = checkedInit(init);
  const bytes = bodyBytes(init.body);
  const method = (init.method ?? 'POST').toUpperCase();
  if (/^(GET|HEAD)$/.test(method) && bytes.byteLength > 0) {
    throw new TypeError(`signedLambdaEvent cannot send a body with ${method}: the signature covers the body, so pass body: '' or use another method`);
  }
  const signed = await signWebhook({ secret: init.secret, body: bytes, id: init.id, timestamp: init.timestamp });
  let text: string | undefined;
  if (init.base64 !== true) {
    try {
      text = strictUtf8.decode(bytes);
    } catch {
      text = undefined;
    }
  }
  const body = bytes.byteLength === 0 ? undefined : (text ?? base64Encode(bytes));
  const isBase64Encoded = body !== undefined && text === undefined;
  const now = new Date();
  const requestId = crypto.randomUUID();
  const apiId = source === 'function-url' ? 'u5k3xq7wz2m9c4h8p6t1r0v2b3n4' : 'a1b2c3d4e5';
  const domainName = source === 'function-url' ? `${apiId}.lambda-url.us-east-1.on.aws` : `${apiId}.execute-api.us-east-1.amazonaws.com`;
  const query = queryOf(search);

  if (source === 'rest-api') {
    const headers = mergedHeaders([
      ['Content-Type', 'application/json'],
      ['Host', domainName],
      ['User-Agent', USER_AGENT],
      ['X-Forwarded-For', SOURCE_IP],
      ['X-Forwarded-Proto', 'https'],
      ...Object.entries(signed.headers).map(([name, value]) => [titleCase(name), value] as const),
      ...Object.entries(init.headers ?? {}),
    ]);
    return {
      resource: path,
      path,
      httpMethod: method,
      headers: Object.fromEntries(headers),
      multiValueHeaders: Object.fromEntries(headers.map(([name, value]) => [name, [value]])),
      queryStringParameters: query?.single ?? null,
      multiValueQueryStringParameters: query?.multi ?? null,
      pathParameters: init.pathParameters ? { ...init.pathParameters } : null,
      stageVariables: null,
      requestContext: {
        accountId: '123456789012',
        apiId,
        authorizer: null,
        domainName,
        domainPrefix: apiId,
        extendedRequestId: requestId,
        httpMethod: method,
        identity: {
          accessKey: null,
          accountId: null,
          apiKey: null,
          apiKeyId: null,
          caller: null,
          clientCert: null,
          cognitoAuthenticationProvider: null,
          cognitoAuthenticationType: null,
          cognitoIdentityId: null,
          cognitoIdentityPoolId: null,
          principalOrgId: null,
          sourceIp: SOURCE_IP,
          user: null,
          userAgent: USER_AGENT,
          userArn: null,
        },
        path: `/prod${path}`,
        protocol: 'HTTP/1.1',
        requestId,
        requestTime: requestTime(now),
        requestTimeEpoch: now.getTime(),
        resourceId: 'abc123',
        resourcePath: path,
        stage: 'prod',
      },
      body: body ?? null,
      isBase64Encoded,
    };
  }

  const pairs = mergedHeaders([
    ['content-type', 'application/json'],
    ['host', domainName],
    ['user-agent', USER_AGENT],
    ['x-forwarded-for', SOURCE_IP],
    ['x-forwarded-proto', 'https'],
    ...Object.entries(signed.headers),
    ...Object.entries(init.headers ?? {}),
  ]).map(([name, value]) => [name.toLowerCase(), value] as const);
  const cookie = pairs.find(([name]) => name === 'cookie')?.[1];
  const routeKey = source === 'function-url' ? '$default' : `${method} ${path}`;
  return {
    version: '2.0',
    routeKey,
    rawPath: path,
    rawQueryString: search,
    ...(cookie === undefined ? {} : { cookies: cookie.split(/;\s*/).filter((part) => part !== '') }),
    headers: Object.fromEntries(pairs.filter(([name]) => name !== 'cookie')),
    ...(query ? { queryStringParameters: Object.fromEntries(Object.entries(query.multi).map(([name, values]) => [name, values.join(',')])) } : {}),
    ...(init.pathParameters ? { pathParameters: { ...init.pathParameters } } : {}),
    requestContext: {
      accountId: source === 'function-url' ? 'anonymous' : '123456789012',
      apiId,
      domainName,
      domainPrefix: apiId,
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: SOURCE_IP, userAgent: USER_AGENT },
      requestId,
      routeKey,
      stage: '$default',
      time: requestTime(now),
      timeEpoch: now.getTime(),
    },
    ...(body === undefined ? {} : { body }),
    isBase64Encoded,
  };
}
