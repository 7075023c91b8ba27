// The Gateway API Inference Extension's endpoint protocol end to end in the embedded Envoy
// (HTTP mode, host/src/proxy.ts): the real filter writes x-gateway-destination-endpoint (the pick,
// then its fallbacks, as an endpoint picker does), a cluster whose override_host policy reads that
// header delivers it and walks the list on a retry when the first host refuses, and the
// x-gateway-destination-endpoint-subset restricts the pick (never a host outside it).
// Snapshots come from a stand-in agent serving the agent's own codec output.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { EnvoyProxy } from '../../host/src';
import { ROOT, WASM } from './helpers';
import { freePort as deadPort } from '../rules/etcd-server'; // a port bound, then closed: connecting is refused

const AUTH = 'inference.prod.svc.cluster.local';

interface Backend { name: string; port: number; server: http.Server; hits: number; last?: http.IncomingHttpHeaders }
async function backend(name: string): Promise<Backend> {
  const b: Backend = { name, port: 0, hits: 0, server: http.createServer((req, res) => {
    b.hits++;
    b.last = req.headers;
    req.resume();
    req.on('end', () => { res.writeHead(200, { 'x-backend': name }); res.end(name); });
  }) };
  await new Promise<void>((r) => b.server.listen(0, '127.0.0.1', r));
  b.port = (b.server.address() as AddressInfo).port;
  return b;
}

function inst(port: number, esMs: number): InstanceRecord {
  return { service: 'llm', addr: `127.0.0.1:${port}`, peer: '', healthy: true, reason: 'ok', rho: 0.2, esMs, es2Ms2: 2 * esMs * esMs,
    lambdaPerS: 1, queueDepth: 0, p50Ms: esMs, p99Ms: esMs * 2, baselineP99Ms: esMs * 2, gpuUtil: 0.2, dataAgeMs: 0, slots: 4 };
}

/** The shipped request-aware bootstrap, turned into an InferencePool-style route: override_host on the gateway header. */
function bootstrap(endpoints: number[]): string {
  const doc = YAML.parse(readFileSync(path.join(ROOT, 'envoy/envoy-inference.yaml'), 'utf8'));
  const hcm = doc.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const wasm = hcm.http_filters[0].typed_config.config;
  const pc = JSON.parse(wasm.configuration.value);
  const svc = pc.loadAware.services[0];
  delete svc.request; // body-blind: the protocol is about headers
  Object.assign(svc, { picker: 'band', band: 0, fallbacks: 2, gatewayDestination: true, gatewaySubset: true, inband: { enabled: false } });
  pc.agent = { ...pc.agent, longPollMs: 0, pollMs: 20, timeoutMs: 500 };
  wasm.configuration.value = JSON.stringify(pc);
  const inf = doc.static_resources.clusters.find((c: any) => c.name === 'inference_default');
  inf.load_balancing_policy.policies[0].typed_extension_config.typed_config.override_host_sources = [{ header: 'x-gateway-destination-endpoint' }];
  inf.load_assignment.endpoints[0].lb_endpoints = endpoints.map((port) => ({ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }));
  // the pick route matches the gateway header the cluster reads
  for (const r of hcm.route_config.virtual_hosts[0].routes) {
    for (const h of r.match.headers ?? []) if (h.name === 'x-switchyard-endpoint') h.name = 'x-gateway-destination-endpoint';
  }
  return YAML.stringify(doc);
}

let a: Backend, b: Backend, c: Backend, dead: number, agent: http.Server, proxy: EnvoyProxy;
let instances: InstanceRecord[] = [];
let seq = 1;

before(async () => {
  [a, b, c] = await Promise.all([backend('a'), backend('b'), backend('c')]);
  dead = await deadPort();
  agent = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(encodeSnapshot({ seq: ++seq, generatedAtMs: Date.now(), peers: [], instances }));
  });
  await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
  // the dead instance is the cheapest: the filter picks it first
  instances = [inst(dead, 1), inst(a.port, 10), inst(b.port, 20), inst(c.port, 30)];
  proxy = await EnvoyProxy.start({ configText: bootstrap([dead, a.port, b.port, c.port]), wasmPath: WASM, listenPort: 0, adminPort: 0, workers: 1,
    logLevel: 'warn', clusterAddresses: { switchyard_agent: { address: '127.0.0.1', port: (agent.address() as AddressInfo).port } } });
  // until the snapshot is adopted
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline) {
    const r = await post({});
    if (String(r.headers['x-switchyard-debug'] ?? '').startsWith('instance=')) break;
    await new Promise((res) => setTimeout(res, 50));
  }
});
after(async () => {
  await proxy?.close();
  agent?.close();
  for (const s of [a, b, c]) s?.server.close();
});

function post(headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxy.listenPort, method: 'POST', path: '/v1/completions', agent: false,
      headers: { host: AUTH, 'content-type': 'application/json', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (x: Buffer) => chunks.push(x));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end('{"model":"m","prompt":"hi"}');
  });
}
const at = (port: number) => `127.0.0.1:${port}`;

test('x-gateway-destination-endpoint carries the pick then its fallbacks; the pick refuses, the retry takes the next listed host', async () => {
  const hitsA = a.hits;
  // a client's own copy is overwritten
  const r = await post({ 'x-gateway-destination-endpoint': at(c.port) });
  assert.equal(r.status, 200, r.body);
  assert.equal(r.body, 'a', 'the second listed host served: the list was walked');
  assert.equal(a.hits - hitsA, 1);
  assert.equal(a.last!['x-gateway-destination-endpoint'], `${at(dead)},${at(a.port)},${at(b.port)}`, 'pick, then cheapest first');
  assert.equal(a.last!['x-switchyard-endpoint'], `${at(dead)},${at(a.port)},${at(b.port)}`, 'the same list in the filter\'s own header');
  assert.match(String(r.headers['x-switchyard-debug']), new RegExp(`^instance=127\\.0\\.0\\.1:${dead} `));
  assert.equal(r.headers['x-gateway-destination-endpoint'], undefined, 'never echoed to the client');
});

test('x-gateway-destination-endpoint-subset: the pick and its fallbacks stay inside the subset', async () => {
  const hitsA = a.hits;
  const r = await post({ 'x-gateway-destination-endpoint-subset': `${at(c.port)}, ${at(b.port)}` });
  assert.equal(r.body, 'b', 'the cheapest of the subset');
  assert.equal(b.last!['x-gateway-destination-endpoint'], `${at(b.port)},${at(c.port)}`);
  assert.equal(b.last!['x-gateway-destination-endpoint-subset'], undefined, 'read and removed');
  assert.equal(a.hits, hitsA, 'the cheaper instance outside the subset was not used');
});

test('x-gateway-destination-endpoint-subset with no eligible instance: a local 503, nothing sent outside it', async () => {
  const hits = a.hits + b.hits + c.hits;
  const r = await post({ 'x-gateway-destination-endpoint-subset': '10.255.0.1:80' });
  assert.equal(r.status, 503);
  assert.match(r.body, /no eligible instance for llm/);
  assert.equal(a.hits + b.hits + c.hits, hits);
});
