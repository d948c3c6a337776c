/**
 * FNV-1a over the string's UTF-16 code units, 32 bits, unsigned: a short, stable hash (statement
 * names in Postgres, budget slots and buckets in the stores). Not a defence against chosen inputs.
 */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}
