// The byte helpers live in lib/encoding.ts; this path re-exports them for the modules that import it.
export * from './lib/encoding.ts';
