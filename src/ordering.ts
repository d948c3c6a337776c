/**
 * Ordering: which entity a delivery is about and which version of it, read from the
 * verified payload, so a store can refuse a stale event in the same atomic step as its claim.
 *
 * `webhook-timestamp` cannot order events: it is the time of the attempt and changes with every
 * retry. The event's own version is in the payload (the standard's recommended
 * `{ type, timestamp, data }`, or the app's own `version` / `updated_at`), and only the app knows
 * where, so it says so with `key` and `version`.
 *
 * Versions reach stores as fixed-width strings whose byte order is the versions' order. A store
 * compares two of them as strings (byte by byte, as Redis' Lua, SQL's `COLLATE "C"` and
 * JavaScript's `<` do) and never as numbers: a Redis number is a double, and a bigint past 2^53
 * would lose its last digits there.
 *
 * - An integer (a non-negative safe-integer `number`, or a non-negative `bigint` below 10^40) is
 *   `i` and 40 decimal digits.
 * - A time (a `Date`, or an ISO 8601 / RFC 3339 date-time string with its offset) is `t` and 22
 *   decimal digits: nanoseconds since 0000-01-01T00:00:00Z. Fractions are kept to the nanosecond,
 *   so `…10.344522Z` orders before `…10.344523Z`, and offsets are applied, so `12:00:00+02:00`
 *   equals `10:00:00Z`. Dates and ISO strings compare among themselves.
 * - Across kinds, every integer orders before every time (`i` < `t`). A version function is meant
 *   to return one kind; one that moves from counters to timestamps keeps working (the times are
 *   newer), and one that moves back finds its counters stale, which the `stale` outcome shows.
 *
 * Web types only: this module compiles without Node's.
 */

import { isWebhookError, rejection, type WebhookError } from './errors.ts';
import type { VerifiedWebhook } from './verify.ts';

/**
 * The parsed payload that `ordering.key` and `ordering.version` receive, typed for the standard's
 * recommended shape (`{ type, timestamp, data }`) and open to any other field (as `unknown`: narrow
 * it, or cast the event once to your own type). Like `webhook.json<T>()`, the type is a reading
 * aid, not a check: a function that reads a field the payload lacks throws, and the delivery is
 * refused with `400 INVALID_VERSION`.
 *
 * @example
 * ```ts
 * import type { OrderingEvent } from 'webhook-receiver';
 * const entity = (event: OrderingEvent) => `${event.type}/${String(event.data.id)}`;
 * ```
 */
export interface OrderingEvent {
  readonly type: string;
  readonly timestamp: string;
  readonly data: { readonly [field: string]: unknown };
  readonly [field: string]: unknown;
}

/**
 * What `ordering.version` may return: a non-negative integer (`number` up to
 * `Number.MAX_SAFE_INTEGER`, or `bigint` below 10^40), a valid `Date`, or an ISO 8601 date-time
 * string with an offset (`2026-03-01T10:00:10.344522Z`, `2026-03-01T12:00:10+02:00`).
 *
 * @example
 * ```ts
 * import type { OrderingVersion } from 'webhook-receiver';
 * const versions: OrderingVersion[] = [7, 2n ** 70n, new Date(), '2026-03-01T10:00:10.344522Z'];
 * ```
 */
export type OrderingVersion = number | bigint | Date | string;

/**
 * Options of `createReceiver({ ordering })`: a stale event never overwrites newer state.
 *
 * - `key(event)`: the entity the event is about (a string, a number or a bigint), or `undefined`
 *   for an event that is not ordered (processed as without ordering). Scoped by the idempotency
 *   namespace, so tenants never share an entity. When one entity's event types are ordered apart,
 *   put the type in the key (`${event.type}/${event.data.id}`).
 * - `version(event)`: the event's own version (see {@link OrderingVersion}), never
 *   `webhook-timestamp`, which is the time of the attempt.
 * - `exclusive` (default `true`): one delivery of an entity at a time; another answers
 *   `409 ENTITY_BUSY` with `Retry-After`. `false` lets handlers of one entity run side by side
 *   (for commutative handlers): then only the recorded highest version is guaranteed never to go
 *   down, and a slow older delivery can still finish after a newer one.
 *
 * `key` or `version` throwing, a key that is not a non-empty string, number or bigint of at most
 * {@link MAX_ENTITY_LENGTH} characters, or a version that is none of the accepted kinds (`NaN`, a
 * negative number, a fraction, an unparseable string, `null`) answers `400 INVALID_VERSION`.
 *
 * @example
 * ```ts
 * import { createReceiver, type OrderingOptions } from 'webhook-receiver';
 * const ordering: OrderingOptions = { key: (event) => event.data.id, version: (event) => event.timestamp };
 * const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET!, ordering });
 * ```
 */
export interface OrderingOptions {
  /** The entity a signed delivery's parsed payload is about, or `undefined` for "not ordered". */
  key: (event: OrderingEvent) => unknown;
  /** The event's own version: a number, a bigint, a `Date` or an ISO 8601 string with an offset. */
  version: (event: OrderingEvent) => unknown;
  /** One delivery of an entity at a time (default `true`); see above for `false`. */
  exclusive?: boolean;
}

/**
 * 512: the longest entity key (`ordering.key`'s result, as a string) a delivery may name.
 *
 * @example
 * ```ts
 * import { MAX_ENTITY_LENGTH } from 'webhook-receiver';
 * const key = (event: { data: { id: string } }) => event.data.id.slice(0, MAX_ENTITY_LENGTH);
 * ```
 */
export const MAX_ENTITY_LENGTH = 512;

/** Digits of an integer version: 10^40 − 1 is past 2^128 (UUIDs as integers, 64-bit snowflakes). */
const INTEGER_DIGITS = 40;
/** Digits of a time version: nanoseconds from year 0 to past the last `Date` (+275760) fit in 22. */
const TIME_DIGITS = 22;
const INTEGER_LIMIT = 10n ** BigInt(INTEGER_DIGITS);
/** Seconds a time may reach (13 digits before the 9 of the nanoseconds). */
const TIME_SECONDS_LIMIT = 10 ** (TIME_DIGITS - 9);
const NANOS_PER_SECOND = 1_000_000_000;

/**
 * Days from 1970-01-01 to the given proleptic Gregorian date (negative before it), for any year:
 * the classic era-based computation, exact in integers.
 */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** Seconds from 0000-01-01T00:00:00Z to the Unix epoch: what makes every time from year 0 on non-negative. */
const EPOCH_FROM_YEAR_ZERO_SECONDS = -daysFromCivil(0, 1, 1) * 86_400;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

// Extended-format date-time with seconds and an offset (RFC 3339's profile of ISO 8601, plus
// ISO's comma before the fraction, a six-digit signed year as `Date#toISOString` writes beyond
// 9999, and offsets written `+hhmm` or `+hh`). A date alone, or a time without an offset, is local
// time somewhere: refused, since two servers in two zones would order it differently.
const ISO_DATE_TIME = /^([+-]\d{6}|\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

function invalid(message: string, cause?: unknown): WebhookError {
  return rejection('INVALID_VERSION', message, cause === undefined ? undefined : { cause });
}

/** The time version `t` + 22 digits for `seconds` (from year 0) and `nanos`, or a refusal. */
function timeVersion(seconds: number, nanos: number, what: string): string {
  if (seconds < 0) throw invalid(`the event's version is ${what} before the year 0000, which cannot be ordered`);
  if (seconds >= TIME_SECONDS_LIMIT) throw invalid(`the event's version is ${what} too far in the future to be ordered`);
  return `t${String(seconds).padStart(TIME_DIGITS - 9, '0')}${String(nanos).padStart(9, '0')}`;
}

/** An ISO 8601 date-time string as a time version, or `undefined` when it is not one. */
function isoVersion(text: string): string | undefined {
  const match = ISO_DATE_TIME.exec(text);
  if (match === null) return undefined;
  const [, yearText, monthText, dayText, hourText, minuteText, secondText, fraction, zulu, sign, offsetHours, offsetMinutes] = match;
  // '-000000' is not a year (ISO 8601 and ECMAScript both refuse it).
  if (yearText === '-000000') return undefined;
  const year = Number(yearText);
  const month = Number(monthText);
  const day = Number(dayText);
  const hour = Number(hourText);
  const minute = Number(minuteText);
  // 60 is a leap second (RFC 3339): it counts as the first second of the next minute.
  const second = Number(secondText);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 || second > 60) return undefined;
  let nanos = 0;
  if (fraction !== undefined) {
    // Digits past the ninth must be zeros: finer than a nanosecond, two events would compare
    // equal here and unequal at the sender, and that is refused rather than guessed at.
    if (fraction.length > 9 && !/^0+$/.test(fraction.slice(9))) {
      throw invalid('the event\'s version has a fraction of a second finer than nanoseconds, which cannot be ordered exactly');
    }
    nanos = Number(fraction.slice(0, 9).padEnd(9, '0'));
  }
  let offsetSeconds = 0;
  if (zulu === undefined) {
    const hours = Number(offsetHours);
    const minutes = offsetMinutes === undefined ? 0 : Number(offsetMinutes);
    if (hours > 23 || minutes > 59) return undefined;
    offsetSeconds = (sign === '-' ? -1 : 1) * (hours * 3600 + minutes * 60);
  }
  const seconds = (daysFromCivil(year, month, day) * 86_400 + EPOCH_FROM_YEAR_ZERO_SECONDS) + hour * 3600 + minute * 60 + second - offsetSeconds;
  return timeVersion(seconds, nanos, 'a time');
}

/**
 * A version as the fixed-width, order-preserving string stores compare: `i` and 40 digits for an
 * integer, `t` and 22 digits (nanoseconds since 0000-01-01T00:00:00Z) for a time. Two versions of
 * one kind compare as strings exactly as the values do; every integer sorts before every time.
 * Throws a `WebhookError` with code `INVALID_VERSION` (400) for anything else: `NaN`, a negative
 * or fractional number, a number past `Number.MAX_SAFE_INTEGER` (it has already lost digits: pass
 * a bigint or a string), a bigint of 10^40 or more, an invalid `Date`, a string that is not an
 * ISO 8601 date-time with an offset, `null`, `undefined`, an object.
 *
 * Custom stores and their tests use it to make versions; the receiver calls it on what
 * `ordering.version` returns.
 *
 * @example
 * ```ts
 * import { encodeVersion } from 'webhook-receiver';
 * encodeVersion('2026-03-01T10:00:10.344522Z') < encodeVersion('2026-03-01T10:00:10.344523Z'); // true
 * encodeVersion(2n ** 64n) > encodeVersion(2n ** 64n - 1n); // true
 * encodeVersion(new Date('2026-03-01T10:00:00Z')) === encodeVersion('2026-03-01T12:00:00+02:00'); // true
 * ```
 */
export function encodeVersion(value: unknown): string {
  switch (typeof value) {
    case 'number': {
      if (Number.isNaN(value)) throw invalid("the event's version is NaN");
      if (value < 0) throw invalid("the event's version is a negative number");
      if (!Number.isFinite(value)) throw invalid("the event's version is Infinity");
      if (!Number.isInteger(value)) throw invalid("the event's version is a fraction; versions that are numbers are whole counters (return a Date or an ISO 8601 string for a time)");
      if (value > Number.MAX_SAFE_INTEGER) {
        throw invalid("the event's version is a number past 2^53, which JSON parsing has already rounded; read it as a string and return a bigint");
      }
      return `i${String(value).padStart(INTEGER_DIGITS, '0')}`;
    }
    case 'bigint': {
      if (value < 0n) throw invalid("the event's version is a negative bigint");
      if (value >= INTEGER_LIMIT) throw invalid(`the event's version is a bigint of more than ${INTEGER_DIGITS} digits`);
      return `i${value.toString().padStart(INTEGER_DIGITS, '0')}`;
    }
    case 'string': {
      const version = isoVersion(value);
      if (version === undefined) {
        throw invalid("the event's version is a string that is not an ISO 8601 date-time with seconds and an offset (such as 2026-03-01T10:00:10.344522Z)");
      }
      return version;
    }
    case 'object': {
      if (value instanceof Date) {
        const ms = value.getTime();
        if (Number.isNaN(ms)) throw invalid("the event's version is an invalid Date");
        const milliseconds = ((ms % 1000) + 1000) % 1000;
        return timeVersion((ms - milliseconds) / 1000 + EPOCH_FROM_YEAR_ZERO_SECONDS, milliseconds * 1_000_000, 'a Date');
      }
      throw invalid(value === null ? "the event's version is null" : "the event's version is an object other than a Date");
    }
    case 'undefined':
      throw invalid("the event has no version (ordering.version returned undefined, and ordering.key named an entity)");
    default:
      throw invalid(`the event's version is a ${typeof value}, not a number, bigint, Date or ISO 8601 string`);
  }
}

/** The checked options a receiver keeps. Internal. */
export interface Ordering {
  readonly key: (event: OrderingEvent) => unknown;
  readonly version: (event: OrderingEvent) => unknown;
  readonly exclusive: boolean;
}

/**
 * `options.ordering`, checked at construction (a `TypeError` for a wrong shape), or `undefined`
 * when it is not set. Internal.
 */
export function checkOrderingOptions(options: unknown): Ordering | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== 'object' || options === null) throw new TypeError('ordering must be an options object { key, version, exclusive? }');
  const { key, version, exclusive } = options as { key?: unknown; version?: unknown; exclusive?: unknown };
  if (typeof key !== 'function') throw new TypeError('ordering.key must be a function of the parsed payload that returns the entity (or undefined for an event that is not ordered)');
  if (typeof version !== 'function') throw new TypeError("ordering.version must be a function of the parsed payload that returns the event's version");
  if (exclusive !== undefined && typeof exclusive !== 'boolean') throw new TypeError('ordering.exclusive must be a boolean (default true)');
  return { key: key as Ordering['key'], version: version as Ordering['version'], exclusive: exclusive ?? true };
}

/**
 * The entity's store key, `${namespace}:o:${entity}`: the namespace scopes it (and so the tenant),
 * and the class `o` keeps it apart from every id (`s`, `u`, `w`). Internal.
 */
export function entityKey(namespace: string, entity: string): string {
  return `${namespace}:o:${entity}`;
}

/** `ordering.key`'s result as an entity, `undefined` for "not ordered", or a refusal. */
function entityOf(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  let entity: string;
  if (typeof value === 'string') entity = value;
  else if (typeof value === 'bigint' || (typeof value === 'number' && Number.isFinite(value))) entity = String(value);
  else {
    const what = value === null ? 'null (return undefined for an event that is not ordered)' : `a ${typeof value}`;
    throw invalid(`ordering.key returned ${what}, not a string, number or bigint`);
  }
  if (entity.length === 0) throw invalid('ordering.key returned an empty string');
  if (entity.length > MAX_ENTITY_LENGTH) throw invalid(`ordering.key returned an entity of more than ${MAX_ENTITY_LENGTH} characters`);
  return entity;
}

/**
 * Where an ordered delivery stands: its entity's store key and its encoded version. Internal.
 */
export interface OrderedDelivery {
  /** `${namespace}:o:${entity}`. */
  readonly entity: string;
  /** {@link encodeVersion} of the event's version. */
  readonly version: string;
}

/**
 * The entity and version of a verified delivery, or `undefined` when it is not ordered: the
 * receiver has no `ordering`, the delivery is unsigned (anyone could send a huge version and make
 * every later genuine event stale, so unsigned deliveries bypass ordering), or `key` returned
 * `undefined`. A body that is not JSON throws `INVALID_PAYLOAD` (the `SyntaxError` as cause); `key` or
 * `version` throwing, or returning something unreadable, throws `INVALID_VERSION`. Internal.
 */
export function orderingOf(ordering: Ordering | undefined, webhook: VerifiedWebhook, namespace: string): OrderedDelivery | undefined {
  if (ordering === undefined || !webhook.signed) return undefined;
  let event: OrderingEvent;
  try {
    event = webhook.json<OrderingEvent>();
  } catch (error) {
    // `webhook.json()` refuses a body that is not JSON with INVALID_PAYLOAD (the SyntaxError as cause).
    if (isWebhookError(error)) throw error;
    throw rejection('INVALID_PAYLOAD', 'the payload is not JSON, so ordering cannot read its entity and version', { cause: error });
  }
  let key: unknown;
  try {
    key = ordering.key(event);
  } catch (error) {
    throw invalid('ordering.key threw on this event', error);
  }
  const entity = entityOf(key);
  if (entity === undefined) return undefined;
  let version: unknown;
  try {
    version = ordering.version(event);
  } catch (error) {
    throw invalid('ordering.version threw on this event', error);
  }
  return { entity: entityKey(namespace, entity), version: encodeVersion(version) };
}
