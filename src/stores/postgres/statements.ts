/**
 * The store's statements for one table option, each with the name it is prepared under.
 */

import { fnv1a } from '../internal.ts';
import { signedTexts, unsignedTexts, type KeyOperation } from './claims.sql.ts';
import { tableNames } from './ddl.sql.ts';
import { orderedTexts, type OrderedOperation } from './ordering.sql.ts';

/**
 * One of the store's statements and the name it is prepared under: the operation, then a hash of
 * the text, so two stores on different tables in one app never give one name two texts (which
 * `pg` refuses).
 */
export interface Statement {
  name: string;
  text: string;
}

/** The statements of one key class (signed ids in the claims table, unsigned ones in their slots). */
export type KeyStatements = Record<KeyOperation, Statement>;

/** The statements of one table option, built once per store. */
interface Statements {
  signed: KeyStatements;
  unsigned: KeyStatements;
  /** Ordering: signed ids and their entities' rows, in the claims table. */
  ordered: Record<OrderedOperation, Statement>;
  cleanup: Statement;
}

/** A short, stable name for a statement's text: its FNV-1a hash as 8 hex digits. */
function textHash(text: string): string {
  return fnv1a(text).toString(16).padStart(8, '0');
}

/** Each text with its name: `webhook_receiver_<operation><suffix>_<hash of the text>`. */
function named<K extends string>(texts: Record<K, string>, suffix = ''): Record<K, Statement> {
  const result = {} as Record<K, Statement>;
  for (const operation of Object.keys(texts) as K[]) {
    const text = texts[operation];
    result[operation] = { name: `webhook_receiver_${operation}${suffix}_${textHash(text)}`, text };
  }
  return result;
}

/** Every statement of a store on `table`, named. */
export function statements(table: string, unsignedMax: number): Statements {
  const { qualified, unsigned } = tableNames(table);
  const { cleanup, ...signed } = signedTexts(qualified);
  return {
    signed: named(signed),
    unsigned: named(unsignedTexts(unsigned, unsignedMax), '_unsigned'),
    ordered: named(orderedTexts(qualified)),
    cleanup: named({ cleanup }).cleanup,
  };
}
