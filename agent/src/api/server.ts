// The agent's HTTP server: listening, connection and header-time limits, routing by path, and
// a clean close. Routes are plain objects so other modules (the rules engine's admin API) add
// theirs without touching this file.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkingIntervalMs, guardConnections, listen, type ConnectionStats } from './guard';

export interface ApiRoute {
  path: string;
  /** methods accepted (default GET, HEAD) */
  methods?: string[];
  handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL): void;
}

export interface ApiServerOptions {
  host: string;
  port: number;
  /** connections open at once; at the cap the oldest partial or idle one is closed for a new one (api/guard.ts) */
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
  connections: ConnectionStats;
  close(): Promise<void>;
}

export { ListenError } from './guard';

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
    { connectionsCheckingInterval: checkingIntervalMs(opts.headersTimeoutMs) },
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
  const connections = guardConnections(server, { maxConnections: opts.maxConnections, headersTimeoutMs: opts.headersTimeoutMs, requestTimeoutMs: opts.headersTimeoutMs });
  await listen(server, opts.host, opts.port);
  const addr = server.address() as AddressInfo;
  const hostForUrl = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;

  return {
    server,
    url: `http://${hostForUrl}:${addr.port}`,
    host: addr.address,
    port: addr.port,
    connections,
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
