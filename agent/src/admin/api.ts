// The rules admin API: unauthenticated reads from loopback, authenticated and audited writes.
//   GET    /v1/rules                  status (variables, rule sets, flags, overrides, store)
//   GET    /v1/rules/decisions        RuleDecision[] (what the filter applies)
//   PUT    /v1/flags/<name>           {"value":true,"author":"…","reason":"…","ttlS":3600?}
//   DELETE /v1/flags/<name>           {"author":"…","reason":"…"}
//   PUT    /v1/overrides/<set>        {"rule":"…"|"target":"…","author":"…","reason":"…","ttlS":600}
//   DELETE /v1/overrides/<set>        {"author":"…","reason":"…"}
import type * as http from 'node:http';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { FlagEntry, OverrideEntry } from '../overrides/types';
import { authorized, isLoopback } from './auth';

export const MAX_BODY_BYTES = 8192;
/**
 * The admin listener's limits (issue 24 #3), the main listener's defaults: a connection cap with
 * shedding of partial and idle connections (api/guard.ts), the header time, and a request time
 * that admits the header time plus an 8 KiB body from a slow operator's link.
 */
export const ADMIN_MAX_CONNECTIONS = 256;
export const ADMIN_HEADERS_TIMEOUT_MS = 10_000;
export const ADMIN_REQUEST_TIMEOUT_MS = 20_000;

/** What the admin API needs from the rules runtime. */
export interface AdminBackend {
  status(): unknown;
  decisions(): unknown;
  now(): number;
  maxOverrideS: number;
  /** declared flag names */
  isFlag(name: string): boolean;
  /** rule set -> its rule ids; undefined if no such set */
  ruleIds(set: string): ReadonlySet<string> | undefined;
  flags(): ReadonlyMap<string, FlagEntry>;
  overrides(): ReadonlyMap<string, OverrideEntry>;
  putFlag(name: string, e: FlagEntry): Promise<void>;
  deleteFlag(name: string): Promise<boolean>;
  putOverride(set: string, e: OverrideEntry): Promise<void>;
  deleteOverride(set: string): Promise<boolean>;
}

export interface AdminOptions {
  token?: string;
  /** why writes are disabled when there is no token */
  noTokenWhy?: string;
  logger: Logger;
  requests: Counter<'method' | 'outcome'>;
}

class HttpError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

const TARGET_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const textField = (body: Record<string, unknown>, k: string): string => {
  const v = body[k];
  if (typeof v !== 'string' || v.trim() === '' || v.length > 500 || /[\x00-\x1f]/.test(v)) throw new HttpError(400, `${k}: required, 1..500 characters, no control characters`);
  return v;
};

function readBody(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      // keep draining without storing, so that the 413 reaches the client
      if (size > MAX_BODY_BYTES) return void reject(new HttpError(413, `body larger than ${MAX_BODY_BYTES} bytes`));
      chunks.push(c);
    });
    req.on('error', reject);
    req.on('end', () => {
      if (size > MAX_BODY_BYTES) return;
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') return resolve({});
      try {
        const v = JSON.parse(text);
        if (typeof v !== 'object' || v === null || Array.isArray(v)) return reject(new HttpError(400, 'body: must be a JSON object'));
        resolve(v as Record<string, unknown>);
      } catch {
        reject(new HttpError(400, 'body: not valid JSON'));
      }
    });
  });
}

export function createAdminHandler(b: AdminBackend, o: AdminOptions): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  const send = (res: http.ServerResponse, code: number, body: unknown): void => {
    if (res.headersSent || res.destroyed) return;
    const buf = Buffer.from(JSON.stringify(body, null, 2) + '\n');
    res.writeHead(code, { 'content-type': 'application/json', 'content-length': buf.length, 'cache-control': 'no-store', ...(code === 413 ? { connection: 'close' } : {}) });
    res.end(buf);
  };

  const audit = (req: http.IncomingMessage, who: string, what: string, old: unknown, next: unknown, reason: string): void => {
    o.logger.info({ audit: true, who, remote: req.socket.remoteAddress, what, old: old ?? null, new: next ?? null, reason, at: new Date(b.now()).toISOString() }, `admin: ${what} by ${who}`);
  };

  const ttl = (body: Record<string, unknown>, required: boolean): number | undefined => {
    const v = body.ttlS;
    if (v === undefined) {
      if (required) throw new HttpError(400, `ttlS: required (an override must expire), 1..${b.maxOverrideS}`);
      return undefined;
    }
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > b.maxOverrideS) throw new HttpError(400, `ttlS: must be a number of seconds in (0, ${b.maxOverrideS}]`);
    return v;
  };

  async function write(req: http.IncomingMessage, res: http.ServerResponse, kind: string, name: string): Promise<void> {
    const body = await readBody(req);
    const author = textField(body, 'author');
    const reason = textField(body, 'reason');
    const now = b.now();
    if (kind === 'flags') {
      if (!b.isFlag(name)) throw new HttpError(404, `unknown flag "${name}" (declare it in rules.variables with kind: flag)`);
      const old = b.flags().get(name);
      if (req.method === 'PUT') {
        if (typeof body.value !== 'boolean') throw new HttpError(400, 'value: must be true or false');
        const t = ttl(body, false);
        const e: FlagEntry = { value: body.value, author, reason, setAtMs: now, ...(t !== undefined ? { expiresAtMs: now + Math.round(t * 1000) } : {}) };
        await b.putFlag(name, e);
        audit(req, author, `set flag ${name}`, old, e, reason);
        return send(res, 200, { flag: name, ...e });
      }
      const had = await b.deleteFlag(name);
      audit(req, author, `clear flag ${name}`, old, undefined, reason);
      return send(res, had ? 200 : 404, { flag: name, cleared: had });
    }
    const ids = b.ruleIds(name);
    if (!ids) throw new HttpError(404, `unknown rule set "${name}"`);
    const old = b.overrides().get(name);
    if (req.method === 'PUT') {
      const hasRule = body.rule !== undefined;
      if (hasRule === (body.target !== undefined)) throw new HttpError(400, 'exactly one of rule, target');
      if (hasRule && !(typeof body.rule === 'string' && ids.has(body.rule))) throw new HttpError(400, `rule: no rule "${String(body.rule)}" in set "${name}"`);
      if (!hasRule && !(typeof body.target === 'string' && TARGET_RE.test(body.target))) throw new HttpError(400, `target: must match ${TARGET_RE.source}`);
      const t = ttl(body, true)!;
      const e: OverrideEntry = { ...(hasRule ? { rule: body.rule as string } : { target: body.target as string }), author, reason, setAtMs: now, expiresAtMs: now + Math.round(t * 1000) };
      await b.putOverride(name, e);
      audit(req, author, `set override ${name}`, old, e, reason);
      return send(res, 200, { set: name, ...e });
    }
    const had = await b.deleteOverride(name);
    audit(req, author, `clear override ${name}`, old, undefined, reason);
    return send(res, had ? 200 : 404, { set: name, cleared: had });
  }

  return (req, res) => {
    const count = (outcome: string): void => o.requests.inc({ method: req.method === 'GET' || req.method === 'HEAD' ? 'read' : 'write', outcome });
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://admin');
    } catch {
      count('bad_request');
      return send(res, 400, { error: 'bad request' });
    }
    const path = url.pathname;
    const loopback = isLoopback(req.socket.remoteAddress);
    const isAuth = authorized(req.headers.authorization, o.token);
    if (req.method === 'GET' || req.method === 'HEAD') {
      if (!loopback && !isAuth) {
        count('unauthorized');
        return send(res, 401, { error: 'reads from a non-loopback address need the admin token' });
      }
      if (path === '/v1/rules') return count('ok'), send(res, 200, b.status());
      if (path === '/v1/rules/decisions') return count('ok'), send(res, 200, b.decisions());
      count('not_found');
      return send(res, 404, { error: 'not found' });
    }
    const m = /^\/v1\/(flags|overrides)\/([A-Za-z0-9_][A-Za-z0-9._-]{0,63})$/.exec(path);
    if (!m) {
      count('not_found');
      return send(res, 404, { error: 'not found' });
    }
    if (req.method !== 'PUT' && req.method !== 'DELETE') {
      count('bad_method');
      res.setHeader('allow', 'PUT, DELETE');
      return send(res, 405, { error: 'method not allowed' });
    }
    if (!isAuth) {
      count('unauthorized');
      o.logger.warn({ audit: true, remote: req.socket.remoteAddress, what: `${req.method} ${path}`, outcome: 'unauthorized' }, 'admin: refused write without a valid token');
      return send(res, o.token ? 401 : 503, { error: o.token ? 'missing or wrong bearer token' : (o.noTokenWhy ?? 'writes disabled') });
    }
    write(req, res, m[1], m[2]).then(
      () => count('ok'),
      (err: Error) => {
        if (err instanceof HttpError) {
          count(err.code === 413 ? 'too_large' : 'bad_request');
          return send(res, err.code, { error: err.message });
        }
        count('store_error');
        o.logger.error({ err: err.message, what: `${req.method} ${path}` }, 'admin: store write failed');
        send(res, 503, { error: `store unavailable: ${err.message}` });
      },
    );
  };
}
