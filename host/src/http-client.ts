// Outgoing HTTP/1.1 requests with keep-alive, shared by the router (proxy mode) and
// proxy_http_call. Reports connect failures separately from resets after the response started.

import http from 'node:http';
import type { Pair } from './pairs';

export interface Endpoint {
  address: string;
  port: number;
}

export interface OutgoingRequest {
  endpoint: Endpoint;
  method: string;
  path: string;
  authority: string;
  /** Non-pseudo headers in order (duplicates allowed). */
  headers: Pair[];
  body: Buffer;
}

export interface OutgoingCallbacks {
  onHeaders(status: number, headers: Pair[]): void;
  onData(chunk: Buffer): void;
  onEnd(): void;
  /** beforeHeaders: true when no response headers were received. reason: Envoy-style reset reason. */
  onError(beforeHeaders: boolean, reason: string, err: Error): void;
}

const agents = new Map<string, http.Agent>();
function agentFor(ep: Endpoint): http.Agent {
  const key = `${ep.address}:${ep.port}`;
  let a = agents.get(key);
  if (!a) {
    a = new http.Agent({ keepAlive: true, maxSockets: 1024 });
    agents.set(key, a);
  }
  return a;
}

export function destroyAgents(): void {
  for (const a of agents.values()) a.destroy();
  agents.clear();
}

/** Envoy's reset reason text for a Node socket error. */
export function resetReason(err: NodeJS.ErrnoException, beforeHeaders: boolean): string {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'remote connection failure, transport failure reason: delayed connect error: Connection refused';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'remote connection failure, transport failure reason: delayed connect error: No route to host';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'remote connection failure';
    case 'ETIMEDOUT':
      return 'connection timeout';
    default:
      return beforeHeaders ? 'connection termination' : 'connection termination';
  }
}

export function sendHttp(req: OutgoingRequest, cb: OutgoingCallbacks): { abort(): void } {
  const raw: string[] = ['host', req.authority];
  for (const [k, v] of req.headers) {
    if (k === 'host') continue;
    raw.push(k, v);
  }
  let gotHeaders = false;
  let finished = false;
  const r = http.request({
    host: req.endpoint.address,
    port: req.endpoint.port,
    method: req.method,
    path: req.path,
    headers: raw as unknown as http.OutgoingHttpHeaders,
    agent: agentFor(req.endpoint),
    setHost: false,
  });
  r.on('response', (res) => {
    gotHeaders = true;
    const pairs: Pair[] = [];
    for (let i = 0; i < res.rawHeaders.length; i += 2) pairs.push([res.rawHeaders[i].toLowerCase(), res.rawHeaders[i + 1]]);
    cb.onHeaders(res.statusCode ?? 0, pairs);
    res.on('data', (c: Buffer) => { if (!finished) cb.onData(c); });
    res.on('end', () => {
      if (finished) return;
      finished = true;
      cb.onEnd();
    });
    res.on('aborted', () => {
      if (finished) return;
      finished = true;
      cb.onError(false, 'connection termination', new Error('response aborted'));
    });
    res.on('error', (e) => {
      if (finished) return;
      finished = true;
      cb.onError(false, resetReason(e as NodeJS.ErrnoException, false), e);
    });
  });
  r.on('error', (e) => {
    if (finished) return;
    finished = true;
    cb.onError(!gotHeaders, resetReason(e as NodeJS.ErrnoException, !gotHeaders), e);
  });
  if (req.body.length) r.end(req.body);
  else r.end();
  return {
    abort: () => {
      finished = true;
      r.destroy();
    },
  };
}
