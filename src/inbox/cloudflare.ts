// The inbox on Cloudflare Queues is the folder cloudflare/; this path re-exports it for the modules that import it.
export * from './cloudflare/index.ts';
