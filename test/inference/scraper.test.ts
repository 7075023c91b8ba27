// scrapeOnce outcomes against local servers: status classes, the non-2xx message, parse errors,
// a bad address, a timeout, the request it sends, https with a self-signed certificate
// (fixtures/tls: a test-only key and certificate for 127.0.0.1, made with openssl req -x509).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { scrapeOnce, type ScrapeOutcome } from '../../agent/src/inference/scraper';

async function serve(handler: http.RequestListener): Promise<{ addr: string; close: () => Promise<void> }> {
  const srv = http.createServer(handler);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    addr: `127.0.0.1:${(srv.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}

const OPTS = { timeoutMs: 2000, maxBodyBytes: 1 << 20 };
const scrape = (addr: string, opts = OPTS): Promise<ScrapeOutcome> => scrapeOnce({ addr, path: '/metrics', scheme: 'http' }, opts);

test('scrape: 2xx pages are parsed (200 and 299), the GET names the path and asks for the text format', async () => {
  const seen: Array<{ url?: string; method?: string; accept?: string; ua?: string }> = [];
  let status = 200;
  const s = await serve((req, res) => {
    seen.push({ url: req.url, method: req.method, accept: req.headers.accept, ua: req.headers['user-agent'] });
    res.writeHead(status, { 'content-type': 'text/plain' }).end('# TYPE up gauge\nup 1\n');
  });
  try {
    for (status of [200, 299]) {
      const o = await scrape(s.addr);
      assert.equal(o.ok, true, `status ${status}`);
      if (!o.ok) continue;
      assert.equal(o.status, status);
      assert.equal(o.exposition.samples.get('up')?.[0].value, 1);
      assert.equal(o.bytes, '# TYPE up gauge\nup 1\n'.length);
      assert.ok(o.durationMs >= 0);
    }
    assert.deepEqual(seen[0], { url: '/metrics', method: 'GET', accept: 'text/plain;version=0.0.4;q=1,*/*;q=0.1', ua: 'switchyard-agent' });
  } finally {
    await s.close();
  }
});

test('scrape: a non-2xx answer is http_error with the status and the start of its body, never parsed', async () => {
  let status = 503;
  let body = 'overloaded, retry later';
  const s = await serve((_req, res) => res.writeHead(status, { 'content-type': 'text/plain' }).end(body));
  try {
    let o = await scrape(s.addr);
    assert.deepEqual([o.ok, !o.ok && o.reason, o.status], [false, 'http_error', 503]);
    assert.equal(!o.ok && o.message, 'HTTP 503: overloaded, retry later');
    // a body that is not an exposition (an HTML error page) is still an HTTP error, not a parse error
    status = 500;
    body = '<html>{{{ not metrics';
    o = await scrape(s.addr);
    assert.equal(!o.ok && o.reason, 'http_error');
    assert.equal(!o.ok && o.message, 'HTTP 500: <html>{{{ not metrics');
    // the body text is cut at 120 characters; an empty body gives the status alone
    body = 'x'.repeat(500);
    o = await scrape(s.addr);
    assert.equal(!o.ok && o.message, `HTTP 500: ${'x'.repeat(120)}`);
    body = '';
    status = 404;
    o = await scrape(s.addr);
    assert.equal(!o.ok && o.message, 'HTTP 404');
    status = 300;
    o = await scrape(s.addr);
    assert.deepEqual([o.ok, !o.ok && o.reason, !o.ok && o.message], [false, 'http_error', 'HTTP 300']);
  } finally {
    await s.close();
  }
});

test('scrape: a malformed 200 page is parse_error naming the problem; an address that is not ip:port is unreachable', async () => {
  const s = await serve((_req, res) => res.writeHead(200).end('up{a="1" 1\n'));
  try {
    const o = await scrape(s.addr);
    assert.equal(!o.ok && o.reason, 'parse_error');
    assert.match(!o.ok ? o.message : '', /^malformed exposition: .*line 1/);
  } finally {
    await s.close();
  }
  const bad = await scrape('no-port');
  assert.deepEqual([bad.ok, !bad.ok && bad.reason, bad.durationMs], [false, 'unreachable', 0]);
  assert.match(!bad.ok ? bad.message : '', /invalid address/);
});

test('scrape: no answer within timeoutMs is unreachable, and the outcome comes at the timeout', async () => {
  const s = await serve(() => undefined); // never answers
  try {
    const t0 = Date.now();
    const o = await scrape(s.addr, { timeoutMs: 150, maxBodyBytes: 1024 });
    const took = Date.now() - t0;
    assert.equal(!o.ok && o.reason, 'unreachable');
    assert.match(!o.ok ? o.message : '', /timeout after 150 ms/);
    assert.ok(took >= 140 && took < 1500, `took ${took} ms`);
  } finally {
    await s.close();
  }
});

test('scrape over https: a self-signed certificate is accepted (in-cluster endpoints; the data is load figures)', async () => {
  const dir = path.join(__dirname, 'fixtures', 'tls');
  const srv = https.createServer({ key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')) }, (_req, res) => res.end('up 1\n'));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  try {
    const o = await scrapeOnce({ addr: `127.0.0.1:${(srv.address() as AddressInfo).port}`, path: '/metrics', scheme: 'https' }, OPTS);
    assert.equal(o.ok, true, o.ok ? '' : o.message);
    assert.equal(o.ok && o.exposition.samples.get('up')?.[0].value, 1);
  } finally {
    srv.closeAllConnections();
    await new Promise<void>((r) => srv.close(() => r()));
  }
});
