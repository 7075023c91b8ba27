// One bounded GET of a small JSON document from an instance (Triton's model configuration,
// the OpenAI-style model list): the scrape's rules for time, size and TLS.
import * as http from 'node:http';
import * as https from 'node:https';
import { parseAddr } from './discovery';

/**
 * GET scheme://addr{path}, the body as text, bounded: `timeoutMs` for the whole exchange, at most
 * `maxBytes` read. As for the scrape, https certificates are not verified (in-cluster endpoints;
 * the data is configuration and model names, not secrets). Rejects with an Error whose message
 * starts with the path and says why (a non-2xx status, a timeout, a body over the bound).
 */
export function fetchText(addr: string, path: string, scheme: 'http' | 'https', timeoutMs: number, maxBytes: number, agent?: http.Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const done = (err: Error | undefined, v?: string): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      if (err) reject(new Error(`${path}: ${err.message}`));
      else resolve(v as string);
    };
    let target: { host: string; port: number };
    try {
      target = parseAddr(addr);
    } catch (e) {
      done(e as Error);
      return;
    }
    const mod = scheme === 'https' ? https : http;
    const req = mod.request({
      host: target.host, port: target.port, path, method: 'GET', agent,
      headers: { accept: 'application/json', 'user-agent': 'switchyard-agent' },
      ...(scheme === 'https' ? { rejectUnauthorized: false } : {}),
    });
    timer = setTimeout(() => {
      req.destroy();
      done(new Error(`timeout after ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (e) => done(e));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        res.resume();
        req.destroy();
        done(new Error(`HTTP ${status}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > maxBytes) {
          req.destroy();
          done(new Error(`body larger than ${maxBytes} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on('error', (e) => done(e));
      res.on('end', () => done(undefined, Buffer.concat(chunks).toString('utf8')));
    });
    req.end();
  });
}
