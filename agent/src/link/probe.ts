// One probe = one HTTP GET (keep-alive) or one TCP connect. No Schmitt logic here.
import * as http from 'node:http';
import * as https from 'node:https';
import * as net from 'node:net';
import type { ProbeSpec } from '../config';

export type ProbeOutcome = 'ok' | 'error' | 'http_error' | 'timeout' | 'aborted';

export interface ProbeResult {
  outcome: ProbeOutcome;
  /** measured with process.hrtime.bigint(), from start to the end of the response / connect */
  rttMs: number;
  status?: number;
  error?: string;
}

export interface Prober {
  /** start one probe; `signal` aborts it (outcome 'aborted') */
  run(signal: AbortSignal): Promise<ProbeResult>;
  close(): void;
}

const elapsedMs = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;

export function createProber(spec: ProbeSpec, timeoutMs: number, maxSockets: number): Prober {
  return spec.kind === 'http' ? httpProber(spec, timeoutMs, maxSockets) : tcpProber(spec.address, timeoutMs);
}

function httpProber(spec: { url: string; host?: string }, timeoutMs: number, maxSockets: number): Prober {
  const url = new URL(spec.url);
  const mod = url.protocol === 'https:' ? https : http;
  // Keep-alive: steady-state probes measure the line's RTT, not a TCP handshake each time.
  // maxSockets = the in-flight cap so overlapping probes never queue inside the agent.
  const agent = new mod.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets, scheduling: 'lifo' });
  const headers: Record<string, string> = { 'user-agent': 'switchyard-agent', accept: '*/*' };
  if (spec.host) headers.host = spec.host;
  return {
    run(signal) {
      return new Promise<ProbeResult>((resolve) => {
        const t0 = process.hrtime.bigint();
        // before the request exists: destroying a request with no 'error' listener yet would
        // throw its 'socket hang up' out of the process
        if (signal.aborted) return resolve({ outcome: 'aborted', rttMs: 0 });
        // the first outcome wins: every step below may run again (resolve of a settled promise,
        // clearTimeout, removeEventListener and destroy do nothing the second time)
        const finish = (r: ProbeResult): void => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve(r);
        };
        const req = mod.request(url, { method: 'GET', agent, headers });
        const timer = setTimeout(() => {
          finish({ outcome: 'timeout', rttMs: elapsedMs(t0), error: `no answer within ${timeoutMs} ms` });
          req.destroy();
        }, timeoutMs);
        const onAbort = (): void => {
          finish({ outcome: 'aborted', rttMs: elapsedMs(t0) });
          req.destroy();
        };
        // Stryker disable next-line BooleanLiteral,ObjectLiteral: equivalent, an AbortSignal fires 'abort' once and finish() removes the listener
        signal.addEventListener('abort', onAbort, { once: true });
        req.on('response', (res) => {
          res.on('data', () => {});
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            const rttMs = elapsedMs(t0);
            if (status >= 200 && status < 300) finish({ outcome: 'ok', rttMs, status });
            else finish({ outcome: 'http_error', rttMs, status, error: `HTTP ${status}` });
          });
          res.on('error', (err) => finish({ outcome: 'error', rttMs: elapsedMs(t0), error: err.message }));
        });
        req.on('error', (err) => finish({ outcome: 'error', rttMs: elapsedMs(t0), error: (err as NodeJS.ErrnoException).code ?? err.message }));
        req.end();
      });
    },
    close() {
      agent.destroy();
    },
  };
}

function tcpProber(address: string, timeoutMs: number): Prober {
  const i = address.lastIndexOf(':');
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(i + 1));
  return {
    run(signal) {
      return new Promise<ProbeResult>((resolve) => {
        const t0 = process.hrtime.bigint();
        const sock = net.connect({ host, port });
        // the first outcome wins: every step below may run again (see the HTTP prober)
        const finish = (r: ProbeResult): void => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          sock.destroy();
          resolve(r);
        };
        const timer = setTimeout(() => finish({ outcome: 'timeout', rttMs: elapsedMs(t0), error: `no connect within ${timeoutMs} ms` }), timeoutMs);
        const onAbort = (): void => finish({ outcome: 'aborted', rttMs: elapsedMs(t0) });
        if (signal.aborted) return onAbort();
        // Stryker disable next-line BooleanLiteral,ObjectLiteral: equivalent, an AbortSignal fires 'abort' once and finish() removes the listener
        signal.addEventListener('abort', onAbort, { once: true });
        sock.once('connect', () => finish({ outcome: 'ok', rttMs: elapsedMs(t0) }));
        sock.once('error', (err) => finish({ outcome: 'error', rttMs: elapsedMs(t0), error: (err as NodeJS.ErrnoException).code ?? err.message }));
      });
    },
    close() {},
  };
}
