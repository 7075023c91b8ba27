// The agent's HTTP server: listening, connection and header-time limits, routing by path, and
// a clean close. Routes are plain objects so other modules (the rules engine's admin API) add
// theirs without touching this file.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ApiRoute {
  path: string;
  /** methods accepted (default GET, HEAD) */
  methods?: string[];
  handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL): void;
}

export interface ApiServerOptions {
  host: string;
  port: number;
  /** connections accepted at once; more are closed at accept */
  maxConnections: number;
  /** a connection without complete request headers after this is closed */
  headersTimeoutMs: number;
  routes: ApiRoute[];
}

export interface ApiServer {
  server: http.Server;
  url: string;
  host: string;
  port: number;
  close(): Promise<void>;
}

/** Listening failed (port in use, address not available): the message is one line naming host:port. */
export class ListenError extends Error {
  constructor(
    readonly host: string,
    readonly port: number,
    readonly code: string | undefined,
    detail: string,
  ) {
    super(`cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port}: ${detail}`);
    this.name = 'ListenError';
  }
}

const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'address already in use',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'address not available on this host',
};

export function send(res: http.ServerResponse, code: number, body: string | Buffer, headers: http.OutgoingHttpHeaders = {}): void {
  if (res.destroyed || res.headersSent) return;
  const buf = typeof body === 'string' ? Buffer.from(body) : body;
  res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', 'content-length': buf.length, 'cache-control': 'no-store', ...headers });
  res.end(buf);
}

export async function startApiServer(opts: ApiServerOptions): Promise<ApiServer> {
  const routes = new Map(opts.routes.map((r) => [r.path, r]));
  const server = http.createServer(
    // partial-header connections are swept at this period (Node's default is 30 s)
    { connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(opts.headersTimeoutMs / 2))) },
    (req, res) => {
      let url: URL;
      try {
        url = new URL(req.url ?? '/', 'http://agent');
      } catch {
        return send(res, 400, 'bad request\n');
      }
      const route = routes.get(url.pathname);
      if (!route) return send(res, 404, 'not found\n');
      const methods = route.methods ?? ['GET', 'HEAD'];
      if (!methods.includes(req.method ?? '')) return send(res, 405, 'method not allowed\n', { allow: methods.join(', ') });
      route.handle(req, res, url);
    },
  );
  // Envoy keeps its connection to the agent alive: don't close it under Envoy's feet.
  server.keepAliveTimeout = 65_000;
  // Header time is bounded; the request time is not (long polls are held by the server, not the
  // client, and a GET has no body), so requestTimeout only has to admit the header time.
  server.headersTimeout = opts.headersTimeoutMs;
  server.requestTimeout = opts.headersTimeoutMs;
  server.maxConnections = opts.maxConnections;

  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      const detail = (err.code && LISTEN_ERRORS[err.code]) ?? err.message;
      reject(new ListenError(opts.host, opts.port, err.code, err.code && LISTEN_ERRORS[err.code] ? `${detail} (${err.code})` : detail));
    };
    server.once('error', onError);
    server.listen(opts.port, opts.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const hostForUrl = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;

  return {
    server,
    url: `http://${hostForUrl}:${addr.port}`,
    host: addr.address,
    port: addr.port,
    close: () =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), 500);
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
        // answers just written leave keep-alive connections idle: close them too
        setImmediate(() => server.closeIdleConnections());
      }),
  };
}
