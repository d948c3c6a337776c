/**
 * The relay's identifiers: UUIDs of versions 1 to 8 with the RFC 9562 variant (8, 9, a or b),
 * plus the nil UUID and the all-f ("max") UUID, as its API document defines them. Checked before a
 * request is made, so a typo is a `TypeError` naming the argument, not a 400 or a 404 from the
 * relay, and nothing but a UUID is ever put into a path.
 */

const UUID = /^(?:[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|0{8}-0{4}-0{4}-0{4}-0{12}|f{8}-f{4}-f{4}-f{4}-f{12})$/i;

/** True when `value` is an identifier the relay accepts. */
export function isRelayId(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

/** `value`, checked to be a relay identifier; a `TypeError` naming `what` otherwise. */
export function relayId(value: unknown, what: string): string {
  if (isRelayId(value)) return value;
  const shown = typeof value === 'string' ? JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value) : typeof value;
  throw new TypeError(`${what} must be a UUID (versions 1-8, or the nil or max UUID), as the relay's ids are; got ${shown}`);
}
