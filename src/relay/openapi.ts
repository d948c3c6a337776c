/**
 * The wire names of query parameters, read from the relay's OpenAPI description.
 *
 * The relay's API document names one query parameter, `limit`; the cursor, the filters and the
 * trigger's inline-body switches are "not shown". The relay publishes its OpenAPI 3.1
 * description, so the names come from there: each operation is found by method and path, its
 * parameters (with `$ref`s followed) are given roles by their names, and a role that matches no
 * parameter, or two, is an error naming the operation and the `queryNames` option that settles
 * it. Never a guess.
 */

import { isJsonObject as isObject } from '../lib/checks.ts';
import { RelayError } from './errors.ts';

/**
 * What a query parameter is for:
 * `cursor` (a name holding "cursor" or "after"), `limit` (named `limit`), the filters
 * `destination`, `subscription`, `status` (or "state"), `source` (or "endpoint"), and the
 * trigger wait's `inlineBodies` (a boolean whose name holds "body" or "inline") and
 * `maxInlineBytes` (an integer whose name holds "byte"). Names are compared without case.
 *
 * @example
 * ```ts
 * import type { QueryRole } from 'webhook-receiver/relay';
 * const paging: QueryRole[] = ['cursor', 'limit'];
 * ```
 */
export type QueryRole = 'cursor' | 'limit' | 'destination' | 'subscription' | 'status' | 'source' | 'inlineBodies' | 'maxInlineBytes';

/**
 * Wire names to use instead of the ones the OpenAPI description gives, per operation and role.
 * Where every role an operation has is named here, the description is not read for it (a status
 * list is then sent as a repeated parameter, OpenAPI's default; otherwise a status parameter named
 * here is sent in the style the description gives it).
 *
 * @example
 * ```ts
 * import { relayClient, type RelayQueryNames } from 'webhook-receiver/relay';
 * const queryNames: RelayQueryNames = { deliveries: { cursor: 'after', status: 'state' } };
 * const relay = relayClient({ baseUrl: 'https://relay.example.com', apiKey: process.env.RELAY_API_KEY!, queryNames });
 * ```
 */
export interface RelayQueryNames {
  /** `GET /v1/deliveries`: `cursor`, `limit`, `destination`, `subscription`, `status`. */
  deliveries?: Partial<Record<'cursor' | 'limit' | 'destination' | 'subscription' | 'status', string>>;
  /** `GET /v1/triggers/{triggerId}/wait`: `cursor`, `limit`, `inlineBodies`, `maxInlineBytes`. */
  waitTrigger?: Partial<Record<'cursor' | 'limit' | 'inlineBodies' | 'maxInlineBytes', string>>;
}

/** A query parameter as the client sends it: its wire name and, for lists, how they are spelled. */
export interface WireParameter {
  name: string;
  /** For a list: one `name=value` per item (`multi`), or the items joined by `separator`. */
  list: { kind: 'multi' } | { kind: 'joined'; separator: string };
}

/** An operation whose query the client builds. */
export interface QueryOperation {
  key: keyof RelayQueryNames;
  method: 'get';
  /** The path under the base URL, templates as `{name}`. */
  path: string;
  /** `GET /v1/deliveries`: what errors name. */
  label: string;
  roles: readonly QueryRole[];
}

/** The wire parameter of each role of one operation, or why there is none. */
export interface ResolvedQuery {
  operation: QueryOperation;
  parameters: Partial<Record<QueryRole, WireParameter>>;
  /** Why a role has no parameter: no candidate, or two. */
  problems: Partial<Record<QueryRole, string>>;
}

type Json = Record<string, unknown>;

function describeFailure(operation: QueryOperation, message: string, role?: QueryRole): RelayError {
  const option = role === undefined ? `queryNames.${operation.key}` : `queryNames.${operation.key}.${role}`;
  return new RelayError({ status: 0, code: 'QUERY_NAMES', operation: operation.label, message: `${message}; name the parameter with the ${option} option` });
}

/** Follows a local `$ref` (`#/components/parameters/Cursor`), a few levels deep at most. */
function deref(document: Json, value: unknown): unknown {
  let current = value;
  for (let depth = 0; depth < 16 && isObject(current) && typeof current.$ref === 'string'; depth++) {
    const ref = current.$ref;
    if (!ref.startsWith('#/')) return undefined;
    let target: unknown = document;
    for (const raw of ref.slice(2).split('/')) {
      const part = raw.replaceAll('~1', '/').replaceAll('~0', '~');
      target = isObject(target) ? target[part] : undefined;
    }
    current = target;
  }
  return current;
}

const template = (path: string) => path.replace(/\{[^}]*\}/g, '{}');

/** The path item of `path`, written in full or under a server URL that already holds `/v1`. */
function findPathItem(document: Json, path: string): Json | undefined {
  const paths = document.paths;
  if (!isObject(paths)) return undefined;
  const wanted = template(path);
  const withoutVersion = wanted.replace(/^\/v1(?=\/)/, '');
  for (const [key, item] of Object.entries(paths)) {
    const shape = template(key);
    if (shape === wanted || shape === withoutVersion) {
      const resolved = deref(document, item);
      if (isObject(resolved)) return resolved;
    }
  }
  return undefined;
}

function schemaTypes(document: Json, parameter: Json): string[] {
  const schema = deref(document, parameter.schema);
  if (!isObject(schema)) return [];
  const type = schema.type;
  if (typeof type === 'string') return [type];
  if (Array.isArray(type)) return type.filter((entry): entry is string => typeof entry === 'string');
  return [];
}

/** The roles a parameter's name and type give it. */
function rolesOf(name: string, types: readonly string[]): QueryRole[] {
  const lower = name.toLowerCase();
  const roles: QueryRole[] = [];
  if (lower === 'limit') roles.push('limit');
  if (lower.includes('cursor') || lower.includes('after')) roles.push('cursor');
  if (lower.includes('destination')) roles.push('destination');
  if (lower.includes('subscription')) roles.push('subscription');
  if (lower.includes('status') || lower.includes('state')) roles.push('status');
  if (lower.includes('source') || lower.includes('endpoint')) roles.push('source');
  if (types.includes('boolean') && (lower.includes('body') || lower.includes('inline'))) roles.push('inlineBodies');
  if (types.includes('integer') && lower.includes('byte')) roles.push('maxInlineBytes');
  return roles;
}

function listStyle(operation: QueryOperation, parameter: Json): WireParameter['list'] {
  const style = typeof parameter.style === 'string' ? parameter.style : 'form';
  const explode = typeof parameter.explode === 'boolean' ? parameter.explode : style === 'form';
  if (explode && style === 'form') return { kind: 'multi' };
  const separator = !explode ? ({ form: ',', spaceDelimited: ' ', pipeDelimited: '|' } as Record<string, string | undefined>)[style] : undefined;
  if (separator === undefined) {
    throw describeFailure(operation, `its status parameter has style ${JSON.stringify(style)} with explode ${String(explode)}, which the client cannot send`, 'status');
  }
  return { kind: 'joined', separator };
}

/**
 * The wire parameters of `operation` from `document` (the relay's OpenAPI description), with
 * `overrides` taking precedence. Throws a `RelayError` (`QUERY_NAMES`) when the operation is not in
 * the description or requires a query parameter the client has no role for; a role with no
 * candidate or two is recorded in `problems` and only fails a call that needs it.
 */
export function resolveQuery(document: unknown, operation: QueryOperation, overrides: Partial<Record<QueryRole, string>> = {}): ResolvedQuery {
  const parameters: Partial<Record<QueryRole, WireParameter>> = {};
  const problems: Partial<Record<QueryRole, string>> = {};
  const pending = operation.roles.filter((role) => overrides[role] === undefined);
  for (const role of operation.roles) {
    const name = overrides[role];
    if (name !== undefined) parameters[role] = { name, list: { kind: 'multi' } };
  }
  if (pending.length === 0) return { operation, parameters, problems };

  if (!isObject(document)) throw describeFailure(operation, 'the OpenAPI description is not a JSON object');
  const item = findPathItem(document, operation.path);
  const method = item === undefined ? undefined : deref(document, item[operation.method]);
  if (item === undefined || !isObject(method)) throw describeFailure(operation, `the OpenAPI description has no operation ${operation.label}`);

  // Operation-level parameters replace path-level ones of the same name and location.
  const byKey = new Map<string, Json>();
  for (const list of [item.parameters, method.parameters]) {
    if (!Array.isArray(list)) continue;
    for (const entry of list) {
      const parameter = deref(document, entry);
      if (isObject(parameter) && typeof parameter.name === 'string' && typeof parameter.in === 'string') byKey.set(`${parameter.in}:${parameter.name}`, parameter);
    }
  }

  const candidates = new Map<QueryRole, Json[]>();
  for (const parameter of byKey.values()) {
    if (parameter.in !== 'query') continue;
    const name = parameter.name as string;
    const overridden = Object.values(overrides).includes(name);
    const roles = rolesOf(name, schemaTypes(document, parameter));
    const known = roles.filter((role) => operation.roles.includes(role));
    if (known.length === 0 && !overridden && parameter.required === true) {
      throw describeFailure(operation, `the OpenAPI description requires the query parameter ${JSON.stringify(name)}, which the client does not know`);
    }
    for (const role of known) candidates.set(role, [...(candidates.get(role) ?? []), parameter]);
  }

  // A status list named by queryNames is still sent the way the description spells that parameter.
  const namedStatus = overrides.status === undefined ? undefined : [...byKey.values()].find((parameter) => parameter.in === 'query' && parameter.name === overrides.status);
  if (namedStatus !== undefined && parameters.status !== undefined) parameters.status = { name: parameters.status.name, list: listStyle(operation, namedStatus) };

  for (const role of pending) {
    const found = candidates.get(role) ?? [];
    if (found.length === 1) {
      const parameter = found[0]!;
      parameters[role] = { name: parameter.name as string, list: role === 'status' ? listStyle(operation, parameter) : { kind: 'multi' } };
    } else if (found.length === 0) {
      problems[role] = `the OpenAPI description gives no query parameter for the ${role}`;
    } else {
      problems[role] = `the OpenAPI description gives two or more query parameters that may be the ${role} (${found.map((p) => JSON.stringify(p.name)).join(', ')})`;
    }
  }
  return { operation, parameters, problems };
}

/** The wire parameter for `role`, or the `QUERY_NAMES` error that says why there is none. */
export function parameterFor(query: ResolvedQuery, role: QueryRole): WireParameter {
  const parameter = query.parameters[role];
  if (parameter !== undefined) return parameter;
  throw describeFailure(query.operation, query.problems[role] ?? `no query parameter for the ${role}`, role);
}
