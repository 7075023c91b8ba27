// HTTP mode: the embedded Envoy stand-in driven by an Envoy bootstrap YAML.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { EnvoyProxy, ProxyOptions, parseEnvoyConfig } from '../../host/src';
import { fixturePath, wat } from './helpers';

interface Backend { name: string; port: number; server: http.Server; seen: http.IncomingHttpHeaders[] }

async function backend(name: string, delayMs = 0): Promise<Backend> {
  const seen: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers);
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-backend': name });
      res.end(JSON.stringify({ backend: name, url: req.url, body: Buffer.concat(chunks).toString() }));
    }, delayMs));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { name, port: (server.address() as AddressInfo).port, server, seen };
}

function get(port: number, p: string, headers: Record<string, string> = {}, body?: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, method: body ? 'POST' : 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

let a: Backend;
let b: Backend;
let wasmPath: string;
const CONFIG = fixturePath('envoy.yaml');

before(async () => {
  a = await backend('A');
  b = await backend('B');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pwhost-'));
  wasmPath = path.join(dir, 'filter.wasm');
  writeFileSync(wasmPath, await wat('filter'));
});
after(() => {
  a.server.close();
  b.server.close();
});

async function start(extra: Partial<ProxyOptions> = {}) {
  return EnvoyProxy.start({
    configPath: CONFIG, wasmPath, listenPort: 0, adminPort: 0,
    clusterAddresses: { cloud_a: { address: '127.0.0.1', port: a.port }, cloud_b: { address: '127.0.0.1', port: b.port } },
    ...extra,
  });
}

test('routes on the headers as modified by the Wasm filter (route cache cleared on mutation)', async () => {
  const p = await start();
  try {
    const plain = await get(p.listenPort, '/x', { host: 'svc' });
    assert.equal(plain.status, 200);
    assert.equal(JSON.parse(plain.body).backend, 'A');
    assert.equal(plain.headers['x-got'], '1', 'response went through on_response_headers');
    assert.equal(plain.headers.server, 'envoy');
    assert.ok(plain.headers['x-envoy-upstream-service-time'] !== undefined);
    // the filter sets x-route: to-b → the route matching that header wins
    const rerouted = await get(p.listenPort, '/x', { host: 'svc', 'x-test': 'r' });
    assert.equal(JSON.parse(rerouted.body).backend, 'B');
    const seenByB = b.seen[b.seen.length - 1];
    assert.equal(seenByB['x-route'], 'to-b');
    assert.equal(seenByB['x-forwarded-proto'], 'http');
    assert.ok(seenByB['x-request-id']);
    assert.equal(seenByB['x-envoy-expected-rq-timeout-ms'], '15000');
    // virtual host by authority + header match on the contract's link status header
    const deg = await get(p.listenPort, '/pay', { host: 'payment-service.prod.svc.cluster.local', 'x-cross-cloud-status': 'degraded' });
    assert.equal(JSON.parse(deg.body).backend, 'B');
    const wild = await get(p.listenPort, '/pay', { host: 'api.payments.example' });
    assert.equal(JSON.parse(wild.body).backend, 'A');
  } finally {
    await p.close();
  }
});

test('routeRefresh:false keeps the route chosen from the original headers', async () => {
  const p = await start({ routeRefresh: false });
  try {
    const r = await get(p.listenPort, '/x', { host: 'svc', 'x-test': 'r' });
    assert.equal(JSON.parse(r.body).backend, 'A');
  } finally {
    await p.close();
  }
});

test('weighted clusters split by weight', async () => {
  const seq = [0.0, 0.74, 0.75, 0.99];
  let i = 0;
  const p = await start({ random: () => seq[i++ % seq.length] });
  try {
    const got: string[] = [];
    for (let k = 0; k < 4; k++) got.push(JSON.parse((await get(p.listenPort, '/weighted', { host: 'svc' })).body).backend);
    assert.deepEqual(got, ['A', 'A', 'B', 'B']);
  } finally {
    await p.close();
  }
});

test('ORIGINAL_DST routes to the ip:port in the header; missing/invalid → 503 no healthy upstream', async () => {
  const p = await start();
  try {
    const r = await get(p.listenPort, '/odst', { host: 'svc', 'x-switchyard-endpoint': `127.0.0.1:${b.port}` });
    assert.equal(JSON.parse(r.body).backend, 'B');
    const variants: Record<string, string>[] = [{}, { 'x-switchyard-endpoint': 'not-an-ip:80' }, { 'x-switchyard-endpoint': 'localhost:1' }];
    for (const h of variants) {
      const bad = await get(p.listenPort, '/odst', { host: 'svc', ...h });
      assert.equal(bad.status, 503);
      assert.equal(bad.body, 'no healthy upstream');
      assert.equal(bad.headers['x-got'], '1', 'router local replies also pass the filter');
    }
  } finally {
    await p.close();
  }
});

test('connect failure → 503 upstream connect error; route timeout → 504', async () => {
  const slow = await backend('slow', 1000);
  const p = await start({ clusterAddresses: { cloud_a: { address: '127.0.0.1', port: slow.port } } });
  try {
    const dead = await get(p.listenPort, '/dead', { host: 'svc' });
    assert.equal(dead.status, 503);
    assert.match(dead.body, /^upstream connect error or disconnect\/reset before headers\. reset reason: remote connection failure/);
    const t = await get(p.listenPort, '/slow', { host: 'svc' });
    assert.equal(t.status, 504);
    assert.equal(t.body, 'upstream request timeout');
  } finally {
    await p.close();
    slow.server.close();
  }
});

test('plugin local reply, request body and admin stats', async () => {
  const p = await start();
  try {
    const lr = await get(p.listenPort, '/', { host: 'svc', 'x-test': 'l' });
    assert.equal(lr.status, 403);
    assert.equal(lr.body, 'denied');
    assert.equal(lr.headers['x-reason'], 'test');
    // chunked: the fixture replaces the body without touching content-length (like Envoy, the
    // host does not fix a stale content-length; a plugin changing the body must remove it)
    const body = await get(p.listenPort, '/echo', { host: 'svc', 'transfer-encoding': 'chunked' }, 'hello world');
    assert.equal(JSON.parse(body.body).body, 'a', 'on_request_body replaced the body');
    await get(p.listenPort, '/', { host: 'svc', 'x-test': 'k' });
    const prom = await get(p.adminPort!, '/stats/prometheus');
    assert.equal(prom.status, 200);
    assert.match(prom.body, /^reqs 1$/m);
    const stats = await get(p.adminPort!, '/stats');
    assert.match(stats.body, /^wasmcustom\.reqs: 1$/m);
  } finally {
    await p.close();
  }
});

test('unsupported YAML fields are rejected with their path', () => {
  const text = readFileSync(CONFIG, 'utf8');
  assert.doesNotThrow(() => parseEnvoyConfig(text));
  assert.throws(() => parseEnvoyConfig(text.replace('stat_prefix: ingress_http', 'stat_prefix: ingress_http\n          use_remote_address: true')),
    /unsupported field static_resources\.listeners\[0\]\.filter_chains\[0\]\.filters\[0\]\.typed_config\.use_remote_address/);
  assert.throws(() => parseEnvoyConfig(text.replace('route: { cluster: cloud_a, timeout: 5s }', 'route: { cluster: cloud_a, prefix_rewrite: "/" }')),
    /unsupported field .*virtual_hosts\[1\]\.routes\[6\]\.route\.prefix_rewrite/);
  assert.throws(() => parseEnvoyConfig(text.replace('lb_policy: CLUSTER_PROVIDED', 'lb_policy: ROUND_ROBIN')),
    /Only 'CLUSTER_PROVIDED' is allowed with cluster type 'ORIGINAL_DST'/);
  assert.throws(() => parseEnvoyConfig(text.replace('{ cluster: cloud_b }', '{ cluster: nowhere }')), /unknown cluster nowhere/);
});
