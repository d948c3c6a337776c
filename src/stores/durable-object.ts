// The Durable Object store is the folder durable-object/; this path re-exports it for the modules that import it.
export * from './durable-object/index.ts';
