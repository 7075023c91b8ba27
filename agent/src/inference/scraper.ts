// One HTTP(S) GET of a Prometheus endpoint: keep-alive, timeout, body-size cap.
// Never throws; the outcome carries the reason code of contracts.md.
import * as http from 'node:http';
import * as https from 'node:https';
import { parseAddr } from './discovery';

export type ScrapeFailure = 'unreachable' | 'http_error';

export type ScrapeOutcome =
  | { ok: true; status: number; body: string; durationMs: number }
  | { ok: false; reason: ScrapeFailure; message: string; durationMs: number; status?: number };

export interface ScrapeTarget {
  addr: string;
  path: string;
  scheme: 'http' | 'https';
}

export interface ScrapeOptions {
  timeoutMs: number;
  maxBodyBytes: number;
  agent?: http.Agent;
}

export function makeAgents(): { http: http.Agent; https: https.Agent } {
  return {
    http: new http.Agent({ keepAlive: true, maxSockets: 2, keepAliveMsecs: 10_000 }),
    https: new https.Agent({ keepAlive: true, maxSockets: 2, keepAliveMsecs: 10_000 }),
  };
}

export function scrapeOnce(target: ScrapeTarget, opts: ScrapeOptions): Promise<ScrapeOutcome> {
  const t0 = performance.now();
  const dur = (): number => performance.now() - t0;
  return new Promise((resolve) => {
    let done = false;
    const finish = (o: ScrapeOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(o);
    };
    let host: string;
    let port: number;
    try {
      ({ host, port } = parseAddr(target.addr));
    } catch (e) {
      finish({ ok: false, reason: 'unreachable', message: (e as Error).message, durationMs: 0 });
      return;
    }
    const mod = target.scheme === 'https' ? https : http;
    const req = mod.request({
      host,
      port,
      path: target.path,
      method: 'GET',
      agent: opts.agent,
      headers: { accept: 'text/plain;version=0.0.4;q=1,*/*;q=0.1', 'user-agent': 'switchyard-agent' },
      // self-signed in-cluster endpoints are common; the data is load figures, not secrets
      ...(target.scheme === 'https' ? { rejectUnauthorized: false } : {}),
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`timeout after ${opts.timeoutMs} ms`));
    }, opts.timeoutMs);
    req.on('error', (e) => finish({ ok: false, reason: 'unreachable', message: e.message || String(e), durationMs: dur() }));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > opts.maxBodyBytes) {
          res.destroy();
          finish({ ok: false, reason: 'http_error', status, message: `body larger than ${opts.maxBodyBytes} bytes`, durationMs: dur() });
          return;
        }
        chunks.push(c);
      });
      res.on('error', (e) => finish({ ok: false, reason: 'unreachable', message: `while reading the body: ${e.message}`, durationMs: dur() }));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        if (status < 200 || status > 299) {
          finish({ ok: false, reason: 'http_error', status, message: `HTTP ${status}${body ? `: ${body.slice(0, 120).trim()}` : ''}`, durationMs: dur() });
        } else {
          finish({ ok: true, status, body, durationMs: dur() });
        }
      });
    });
    req.end();
  });
}
