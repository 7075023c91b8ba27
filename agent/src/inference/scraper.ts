// One HTTP(S) GET of a Prometheus endpoint: keep-alive, timeout, body-size cap, and the body
// parsed as it arrives (ExpositionParser, one chunk per socket read) so that a large page
// neither blocks the event loop the link probes share nor is held whole in memory; a body over
// the cap is aborted as soon as the cap is crossed.
// Never throws; the outcome carries the reason code of contracts.md.
import * as http from 'node:http';
import * as https from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import { parseAddr } from './discovery';
import { type Exposition, ExpositionParseError, ExpositionParser, type ParseOptions } from './exposition';

export type ScrapeFailure = 'unreachable' | 'http_error' | 'parse_error';

export type ScrapeOutcome =
  | { ok: true; status: number; exposition: Exposition; bytes: number; durationMs: number }
  | { ok: false; reason: ScrapeFailure; message: string; durationMs: number; status?: number; bytes?: number };

export interface ScrapeTarget {
  addr: string;
  path: string;
  scheme: 'http' | 'https';
}

export interface ScrapeOptions {
  timeoutMs: number;
  maxBodyBytes: number;
  agent?: http.Agent;
  parse?: ParseOptions;
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
    // declared before finish(): a bad address finishes before the request (and its timer) exists
    let timer: NodeJS.Timeout | undefined;
    // the first outcome wins; a second call only repeats idempotent steps
    const finish = (o: ScrapeOutcome): void => {
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
    timer = setTimeout(() => {
      req.destroy(new Error(`timeout after ${opts.timeoutMs} ms`));
    }, opts.timeoutMs);
    req.on('error', (e) => finish({ ok: false, reason: 'unreachable', message: e.message || String(e), durationMs: dur() }));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const ok = status >= 200 && status <= 299;
      const decoder = new StringDecoder('utf8');
      const parser = new ExpositionParser(opts.parse);
      let errorText = ''; // the start of a non-2xx body, for the message
      let size = 0;
      const abort = (o: ScrapeOutcome): void => {
        res.destroy();
        req.destroy();
        finish(o);
      };
      const declared = Number(res.headers['content-length']);
      if (declared > opts.maxBodyBytes) {
        abort({ ok: false, reason: 'http_error', status, bytes: 0, message: `body larger than ${opts.maxBodyBytes} bytes (content-length ${declared}, not read)`, durationMs: dur() });
        return;
      }
      res.on('data', (c: Buffer) => {
        if (done) return;
        size += c.length;
        if (size > opts.maxBodyBytes) {
          abort({ ok: false, reason: 'http_error', status, bytes: size, message: `body larger than ${opts.maxBodyBytes} bytes (aborted after ${size})`, durationMs: dur() });
          return;
        }
        if (!ok) {
          if (errorText.length < 120) errorText += decoder.write(c);
          return;
        }
        try {
          parser.push(decoder.write(c));
        } catch (e) {
          abort({ ok: false, reason: 'parse_error', status, bytes: size, message: parseMessage(e), durationMs: dur() });
          return;
        }
        // over a storage bound: the page is refused whatever the rest says (extractSignals), so
        // the rest is not read (a 100,000-bucket histogram parsed to its end cost the event loop)
        if (parser.overBound !== undefined) {
          abort({ ok: true, status, exposition: parser.partial(), bytes: size, durationMs: dur() });
          return;
        }
        // libuv reads a readable socket up to 32 times per poll: without a pause, a fast server's
        // page would be parsed in one long run; one chunk per event-loop turn lets timers (the
        // link probes) run between chunks
        res.pause();
        // resume() of a stream finish() destroyed or that ended does nothing
        setImmediate(() => res.resume());
      });
      res.on('error', (e) => finish({ ok: false, reason: 'unreachable', message: `while reading the body: ${e.message}`, durationMs: dur() }));
      res.on('end', () => {
        if (done) return;
        if (!ok) {
          errorText += decoder.end();
          finish({ ok: false, reason: 'http_error', status, message: `HTTP ${status}${errorText ? `: ${errorText.slice(0, 120).trim()}` : ''}`, durationMs: dur() });
          return;
        }
        try {
          parser.push(decoder.end());
          finish({ ok: true, status, exposition: parser.end(), bytes: size, durationMs: dur() });
        } catch (e) {
          finish({ ok: false, reason: 'parse_error', status, bytes: size, message: parseMessage(e), durationMs: dur() });
        }
      });
    });
    req.end();
  });
}

function parseMessage(e: unknown): string {
  return `malformed exposition: ${e instanceof ExpositionParseError ? e.message : (e as Error).message}`;
}
