// Shared helpers for agent/sim tests (not a test file itself).
import type { EventEmitter } from 'node:events';
import * as http from 'node:http';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolve with the first event args satisfying pred; reject after timeoutMs. */
export function waitForEvent<T>(em: EventEmitter<any>, event: string, pred: (v: T) => boolean, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => {
      em.off(event, on);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${event}`));
    }, timeoutMs);
    const on = (v: T): void => {
      if (!pred(v)) return;
      clearTimeout(t);
      em.off(event, on);
      resolve(v);
    };
    em.on(event, on);
  });
}

export interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  ms: number;
}

/** Plain HTTP request without keep-alive pooling surprises. */
export function request(url: string, opts: { method?: string; body?: string; headers?: Record<string, string> } = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(url, { method: opts.method ?? 'GET', agent: false, headers: opts.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), ms: performance.now() - t0 }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
