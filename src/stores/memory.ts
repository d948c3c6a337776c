// The memory store is the folder memory/; this path re-exports it for the modules that import it.
export * from './memory/index.ts';
