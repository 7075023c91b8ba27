// proxy_http_call with Envoy's AsyncClient semantics.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { ClusterRequest, ClusterSpec, ProxyWasmHost, WasmResult, destroyHttpAgents } from '../../host/src';
import { wat } from './helpers';

const REQ = { ':method': 'GET', ':path': '/orig', ':authority': 'svc', 'x-test': 's' };

async function mk(clusters: Record<string, ClusterSpec>, clock: 'manual' | 'real' = 'manual') {
  return ProxyWasmHost.create({ wasm: await wat('filter'), clock, clusters, canary: false, mainThread: false, workers: 1 });
}
function callresp(h: ProxyWasmHost) {
  const b = h.sharedData().callresp.value;
  return { headers: b.readUInt32LE(0), body: b.readUInt32LE(4), trailers: b.readUInt32LE(8), token: b.readUInt32LE(12) };
}
const sd = (h: ProxyWasmHost, k: string) => h.sharedData()[k]?.value.toString();

test('in-process cluster: response delivered on flush to the root context; stream resumes via effective context', async () => {
  const seen: ClusterRequest[] = [];
  const host = await mk({
    upstream: { handler: (req) => { seen.push(req); return { status: 200, headers: { 'x-a': 'b' }, body: 'pong' }; } },
  });
  try {
    const p = host.request(REQ);
    assert.deepEqual(host.sharedData().rc.value, Buffer.from([WasmResult.Ok]));
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0].headers, [[':method', 'GET'], [':path', '/check'], [':authority', 'upstream']]);
    assert.equal(host.sharedData().callresp, undefined, 'not delivered before flush');
    await host.flush();
    const r = await p;
    assert.deepEqual(callresp(host), { headers: 2, body: 4, trailers: 0, token: 4 });
    assert.equal(sd(host, 'status'), '200');
    assert.equal(sd(host, 'body'), 'pong');
    assert.deepEqual(r.upstreamHeaders, Object.entries(REQ));
    assert.equal(sd(host, 'trace'), 'cCHKRLDX');
  } finally {
    await host.close();
  }
});

test('real loopback server over HTTP/1.1', async () => {
  const got: { url?: string; host?: string; method?: string }[] = [];
  const srv = http.createServer((req, res) => {
    got.push({ url: req.url, host: req.headers.host, method: req.method });
    res.writeHead(200, { 'x-srv': '1', 'content-type': 'text/plain' });
    res.end('hello');
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  const host = await mk({ upstream: { address: '127.0.0.1', port } }, 'real');
  try {
    const r = await host.request(REQ);
    assert.deepEqual(got, [{ url: '/check', host: 'upstream', method: 'GET' }]);
    assert.equal(sd(host, 'status'), '200');
    assert.equal(sd(host, 'body'), 'hello');
    assert.equal(callresp(host).body, 5);
    assert.ok(r.upstreamHeaders);
  } finally {
    await host.close();
    srv.close();
    destroyHttpAgents();
  }
});

test('closed port: Envoy answers the call with its 503 local reply (onSuccess), not an error', async () => {
  const tmp = http.createServer();
  await new Promise<void>((r) => tmp.listen(0, '127.0.0.1', r));
  const port = (tmp.address() as AddressInfo).port;
  await new Promise<void>((r) => tmp.close(() => r()));
  const host = await mk({ upstream: { address: '127.0.0.1', port } }, 'real');
  try {
    await host.request(REQ);
    assert.equal(sd(host, 'status'), '503');
    assert.match(sd(host, 'body'), /^upstream connect error or disconnect\/reset before headers\. reset reason: remote connection failure/);
    const c = callresp(host);
    assert.equal(c.headers, 3, ':status, content-length, content-type');
    assert.equal(c.trailers, 0);
  } finally {
    await host.close();
    destroyHttpAgents();
  }
});

test('timeout in virtual time: 504 "upstream request timeout" at exactly timeout_ms; the late answer is dropped', async () => {
  const host = await mk({ upstream: { handler: () => ({ status: 200, body: 'late', delayMs: 5000 }) } });
  try {
    const p = host.request(REQ);
    await host.advance(999);
    assert.equal(host.sharedData().callresp, undefined);
    await host.advance(1);
    await p;
    assert.equal(sd(host, 'status'), '504');
    assert.equal(sd(host, 'body'), 'upstream request timeout');
    await host.advance(10_000);
    assert.equal((sd(host, 'trace').match(/K/g) ?? []).length, 1);
  } finally {
    await host.close();
  }
});

test('async handler with delay is delivered at the virtual time it is due', async () => {
  const host = await mk({ upstream: { handler: async () => ({ status: 204, delayMs: 300 }) } });
  try {
    const p = host.request(REQ);
    await host.advance(299);
    assert.equal(host.sharedData().callresp, undefined);
    await host.advance(1);
    await p;
    assert.equal(sd(host, 'status'), '204');
  } finally {
    await host.close();
  }
});

test('a reset (AsyncClient onFailure) calls back with 0 headers, 0 body, 0 trailers', async () => {
  const host = await mk({ upstream: { handler: () => ({ status: 0, reset: true }) } });
  try {
    const p = host.request(REQ);
    await host.flush();
    await p;
    assert.deepEqual(callresp(host), { headers: 0, body: 0, trailers: 0, token: 4 });
    assert.equal(host.sharedData().status, undefined, 'no response headers during a failure callback');
  } finally {
    await host.close();
  }
});

test('unknown cluster and missing :authority → BadArgument; no endpoints → InternalFailure', async () => {
  const host = await mk({ upstream: { endpoints: [] } });
  try {
    host.requestSync({ ':path': '/', 'x-test': 'u' });
    assert.deepEqual(host.sharedData().rc.value, Buffer.from([WasmResult.BadArgument]));
    host.requestSync({ ':path': '/', 'x-test': 'h' });
    assert.deepEqual(host.sharedData().rc.value, Buffer.from([WasmResult.BadArgument]));
    // Router answers "no healthy upstream" synchronously, AsyncClient::send returns nullptr
    const r = host.requestSync({ ':path': '/', 'x-test': 's' });
    assert.deepEqual(host.sharedData().rc.value, Buffer.from([WasmResult.InternalFailure]));
    assert.ok(r.upstreamHeaders);
    await host.flush();
    assert.equal(host.sharedData().callresp, undefined, 'no callback');
  } finally {
    await host.close();
  }
});
