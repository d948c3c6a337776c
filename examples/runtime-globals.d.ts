/**
 * The little of Deno's and Bun's globals that examples/deno.ts and examples/bun.ts use, so
 * `tsc -p tsconfig.json` checks those examples too. A Deno project has the real declarations
 * built in and a Bun project gets them from `@types/bun`; this repository installs neither, and
 * copying an example does not need this file.
 */

declare namespace Deno {
  interface NetAddr {
    hostname: string;
    port: number;
  }
  interface ServeOptions {
    hostname?: string;
    port?: number;
    onListen?: (address: NetAddr) => void;
  }
  interface HttpServer {
    readonly finished: Promise<void>;
    shutdown(): Promise<void>;
  }
  const env: { get(name: string): string | undefined };
  function exit(code?: number): never;
  function serve(options: ServeOptions, handler: (request: Request) => Response | Promise<Response>): HttpServer;
}

declare namespace Bun {
  type RouteHandler = (request: Request) => Response | Promise<Response>;
  type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';
  interface ServeOptions {
    hostname?: string;
    port?: number;
    routes?: Record<string, Response | RouteHandler | Partial<Record<Method, RouteHandler>>>;
    fetch(request: Request): Response | Promise<Response>;
  }
  interface Server {
    readonly url: URL;
    readonly port: number;
    stop(closeActiveConnections?: boolean): Promise<void>;
  }
  const env: Record<string, string | undefined>;
  function serve(options: ServeOptions): Server;
}
