/**
 * Checks of the options and arguments that factories and methods take. Each check decides only
 * whether a value fits; the caller words the error, so a message names the option as its user
 * wrote it. A misuse is a `TypeError` (wrong kind of value) or a `RangeError` (right kind, out of
 * range), thrown at once, never a value that misbehaves later.
 */

/** `true` for any non-null object, arrays included. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** `true` for a non-null object that is not an array: what a JSON document's `{…}` parses to. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** How a value is named in an error: its kind, never its contents (it may be a secret). */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object') return typeof value;
  const constructorName = (value as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof constructorName !== 'string' || constructorName === '' || constructorName === 'Object') return 'an object';
  return `${/^[AEIOU]/.test(constructorName) ? 'an' : 'a'} ${constructorName}`;
}

/** Throws `TypeError(message)` unless `value` is a non-null object. */
export function checkObject(value: unknown, message: string): asserts value is object {
  if (!isObject(value)) throw new TypeError(message);
}

/** Throws `TypeError(message)` unless `value` is a function. */
export function checkFunction(value: unknown, message: string): void {
  if (typeof value !== 'function') throw new TypeError(message);
}

/** Throws `TypeError(message)` unless `value` is a string of at least one character. */
export function checkNonEmptyString(value: unknown, message: string): asserts value is string {
  if (typeof value !== 'string' || value.length === 0) throw new TypeError(message);
}

/**
 * A duration option in seconds, checked: `fallback` when absent, else a positive finite number
 * whose milliseconds stay an exact integer (2^53 ms is some 285 000 years), which stores need.
 * `name` is the option as the user writes it (`idempotency.ttlSeconds`).
 */
export function positiveSeconds(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value * 1000 > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`${name} must be a positive, finite number of seconds (default ${fallback})`);
  }
  return value;
}

/** `true` for an integer from `min` to `max` (a count, a limit, a port). */
export function isWholeNumber(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}

/** A whole-number option from `min` to `max`, checked: `fallback` when absent. `name` is the option as the user writes it. */
export function wholeNumber(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (!isWholeNumber(value, min, max)) {
    throw new RangeError(`${name} must be a whole number from ${min} to ${max} (default ${fallback})`);
  }
  return value;
}
