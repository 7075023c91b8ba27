// Connection limits shared by the agent's listeners (the main API and the rules admin API):
// a cap on connections that never locks new clients out, the header and request times, and a
// listen that fails with one line (ListenError) rather than a stack trace.
//
// The cap (issue 24 #4). Node's `server.maxConnections` closes every NEW connection once the cap
// is reached: 300 partial-header connections held by one local client left 3 of 20 fresh clients
// served (and a filter's poll fell to its fail mode). Here, at the cap a new connection is always
// accepted and the oldest connection that holds no request in progress is closed instead: first
// the oldest partial one (accepted, headers not complete: a stalled or slow client), else the
// least recently used idle keep-alive one. A connection whose request is in progress (a long poll
// held by the agent, an answer being written) is never shed; only when every connection is busy
// is the new one closed at accept, as before. A flood therefore only evicts itself: a client that
// sends its request head within the time the flood needs to open `cap` connections is served.
import type * as http from 'node:http';
import type * as net from 'node:net';

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

/** server.listen as a promise; failures are a ListenError. */
export function listen(server: http.Server, host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      const known = err.code ? LISTEN_ERRORS[err.code] : undefined;
      reject(new ListenError(host, port, err.code, known ? `${known} (${err.code})` : err.message));
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** What guardConnections counts (the listener's own view; tests and /metrics read it). */
export interface ConnectionStats {
  /** connections open now */
  open(): number;
  /** partial-header connections closed to make room for a new one */
  shedPartial: number;
  /** idle keep-alive connections closed to make room for a new one */
  shedIdle: number;
  /** new connections closed at accept because every connection had a request in progress */
  refused: number;
}

interface ConnState {
  /** a request is in progress on it */
  busy: boolean;
  /** it has completed at least one request head (so it is idle keep-alive, not partial, when not busy) */
  served: boolean;
}

/** Partial-header connections are swept at this period (Node's default is 30 s). */
export const checkingIntervalMs = (headersTimeoutMs: number): number => Math.max(50, Math.min(1000, Math.floor(headersTimeoutMs / 2)));

/**
 * Caps `server` at `maxConnections` by shedding (see the head of this file) and bounds the header
 * and request times. Create the server with `connectionsCheckingInterval: checkingIntervalMs(…)`
 * so the header time is enforced promptly.
 */
export function guardConnections(server: http.Server, opts: { maxConnections: number; headersTimeoutMs: number; requestTimeoutMs: number }): ConnectionStats {
  server.headersTimeout = opts.headersTimeoutMs;
  server.requestTimeout = opts.requestTimeoutMs;
  // Map order is accept order; a connection that finishes a request moves to the end, so the
  // first idle one found is the least recently used.
  const conns = new Map<net.Socket, ConnState>();
  const stats: ConnectionStats = { open: () => conns.size, shedPartial: 0, shedIdle: 0, refused: 0 };
  server.on('connection', (socket: net.Socket) => {
    if (conns.size >= opts.maxConnections) {
      let partial: net.Socket | undefined;
      let idle: net.Socket | undefined;
      for (const [s, st] of conns) {
        if (st.busy) continue;
        if (!st.served) { partial = s; break; }
        idle ??= s;
      }
      const victim = partial ?? idle;
      if (victim === undefined) {
        stats.refused++;
        socket.destroy();
        return;
      }
      if (partial) stats.shedPartial++;
      else stats.shedIdle++;
      conns.delete(victim);
      victim.destroy();
    }
    conns.set(socket, { busy: false, served: false });
    socket.once('close', () => conns.delete(socket));
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const socket = req.socket;
    const st = conns.get(socket);
    if (!st) return;
    st.busy = true;
    st.served = true;
    res.once('close', () => {
      st.busy = false;
      if (conns.delete(socket) && !socket.destroyed) conns.set(socket, st);
    });
  });
  return stats;
}
