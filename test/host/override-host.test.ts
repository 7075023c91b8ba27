// The embedded proxy's override_host load-balancing policy (Envoy >= 1.35,
// envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost) and the route retry
// policy it works with. Each behaviour is pinned against Envoy's documentation and source:
//   api/envoy/extensions/load_balancing_policies/override_host/v3/override_host.proto
//     "The request is forwarded to the first address and subsequent addresses are used for
//      request retries or hedging. ... if an overridden host address is not present in the current
//      endpoint set, it is skipped and the next found address is used. If there are not enough
//      overridden addresses to satisfy all retry attempts the fallback load balancing policy is used."
//   source/extensions/load_balancing_policies/override_host/load_balancer.cc
//     getSelectedHosts: sources in order, the FIRST value of a header, split on ',' (whitespace
//     skipped/stripped); getEndpoint: consumeNextHost until findHost finds one in the host map;
//     findHost: "TODO: Validate that host health status did not change" (health is not checked);
//     chooseHostInternal: no hosts, or none left → fallback_picker_lb_.
//   api/envoy/config/route/v3/route_components.proto RetryPolicy: num_retries defaults to 1;
//     without a retry policy a failed attempt is the answer (503).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { EnvoyProxy, parseEnvoyConfig } from '../../host/src';
import { freePort as deadPort } from '../rules/etcd-server'; // a port bound, then closed: connecting is refused

interface Backend { name: string; port: number; server: http.Server; hits: number }

async function backend(name: string, status = 200): Promise<Backend> {
  const b: Backend = { name, port: 0, server: http.createServer((req, res) => {
    b.hits++;
    req.resume();
    req.on('end', () => { res.writeHead(status, { 'x-backend': name }); res.end(name); });
  }), hits: 0 };
  await new Promise<void>((r) => b.server.listen(0, '127.0.0.1', r));
  b.port = (b.server.address() as AddressInfo).port;
  return b;
}


function get(port: number, headers: Record<string, string>) {
  return new Promise<{ status: number; backend: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', headers: { host: 'svc', ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, backend: String(res.headers['x-backend'] ?? Buffer.concat(chunks).toString()) }));
    });
    req.on('error', reject);
    req.end();
  });
}

const lb = (t: string) => ({ policies: [{ typed_extension_config: { name: t, typed_config: { '@type': t } } }] });
const LEAST = 'type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest';

function config(endpoints: number[], retry: Record<string, unknown> | undefined, fallback = LEAST): string {
  return JSON.stringify({
    static_resources: {
      listeners: [{ address: { socket_address: { address: '127.0.0.1', port_value: 0 } }, filter_chains: [{ filters: [{
        name: 'envoy.filters.network.http_connection_manager',
        typed_config: {
          '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
          route_config: { virtual_hosts: [{ name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'svc', timeout: '5s', ...(retry ? { retry_policy: retry } : {}) } }] }] },
          http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } }],
        },
      }] }] }],
      clusters: [{
        name: 'svc', type: 'STATIC', connect_timeout: '1s',
        load_balancing_policy: { policies: [{ typed_extension_config: { name: 'envoy.load_balancing_policies.override_host', typed_config: {
          '@type': 'type.googleapis.com/envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost',
          override_host_sources: [{ header: 'x-switchyard-endpoint' }],
          fallback_policy: lb(fallback),
        } } }] },
        load_assignment: { cluster_name: 'svc', endpoints: [{ lb_endpoints: endpoints.map((port) => ({ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } })) }] },
      }],
    },
  });
}

let a: Backend, b: Backend, c: Backend, outside: Backend;
let dead: number;
const proxies: EnvoyProxy[] = [];
const at = (x: Backend | number) => `127.0.0.1:${typeof x === 'number' ? x : x.port}`;

before(async () => {
  [a, b, c, outside] = await Promise.all([backend('a'), backend('b'), backend('c'), backend('outside')]);
  dead = await deadPort();
});
after(async () => {
  for (const p of proxies) await p.close();
  for (const s of [a, b, c, outside]) s.server.close();
});

async function proxy(retry?: Record<string, unknown>, endpoints = [a.port, b.port, c.port, dead]): Promise<EnvoyProxy> {
  const p = await EnvoyProxy.start({ configText: config(endpoints, retry), listenPort: 0 });
  proxies.push(p);
  return p;
}

test('override_host: the first listed host that is an endpoint of the cluster serves the request', async () => {
  const p = await proxy();
  assert.equal((await get(p.listenPort, { 'x-switchyard-endpoint': at(c) })).backend, 'c');
  assert.equal((await get(p.listenPort, { 'x-switchyard-endpoint': `${at(b)},${at(a)}` })).backend, 'b');
  // not an endpoint of the cluster: skipped, the next listed one is used (no open proxy: a spoofed
  // address outside the service is never connected to)
  assert.equal((await get(p.listenPort, { 'x-switchyard-endpoint': `${at(outside)},${at(a)}` })).backend, 'a');
  assert.equal(outside.hits, 0);
  // whitespace around entries is stripped, empty entries skipped
  assert.equal((await get(p.listenPort, { 'x-switchyard-endpoint': ` , ${at(c)} ,${at(a)}` })).backend, 'c');
});

test('override_host: no header, or no listed host in the cluster → the fallback policy picks an endpoint', async () => {
  const p = await proxy(undefined, [a.port, b.port]);
  const before0 = p.overrideStats.fallback;
  const seen = new Set<string>();
  for (let i = 0; i < 4; i++) seen.add((await get(p.listenPort, {})).backend);
  assert.deepEqual([...seen].sort(), ['a', 'b'], 'the fallback spreads over the endpoints');
  assert.ok(['a', 'b'].includes((await get(p.listenPort, { 'x-switchyard-endpoint': at(outside) })).backend));
  assert.equal(outside.hits, 0);
  assert.equal(p.overrideStats.fallback - before0, 5);
});

test('override_host without a retry policy: a listed host that refuses the connection is the answer (503), as in Envoy', async () => {
  const p = await proxy();
  const r = await get(p.listenPort, { 'x-switchyard-endpoint': `${at(dead)},${at(a)}` });
  assert.equal(r.status, 503);
});

test('override_host with retries: a failed attempt takes the next listed host (the pick, then its fallbacks, in order)', async () => {
  const p = await proxy({ retry_on: 'connect-failure', num_retries: 2 });
  const hitsB = b.hits;
  const r = await get(p.listenPort, { 'x-switchyard-endpoint': `${at(dead)},${at(b)},${at(a)}` });
  assert.equal(r.status, 200);
  assert.equal(r.backend, 'b', 'the second listed host, not the fallback policy');
  assert.equal(b.hits - hitsB, 1);
  // two failures in a row: the third listed host
  const dead2 = await deadPort();
  const p2 = await proxy({ retry_on: 'connect-failure', num_retries: 2 }, [a.port, b.port, c.port, dead, dead2]);
  assert.equal((await get(p2.listenPort, { 'x-switchyard-endpoint': `${at(dead)},${at(dead2)},${at(c)}` })).backend, 'c');
});

test('override_host with retries: the list used up → the fallback policy picks the retry\'s host', async () => {
  const p = await proxy({ retry_on: 'connect-failure', num_retries: 1 }, [a.port, dead]);
  const before0 = p.overrideStats.fallback;
  const r = await get(p.listenPort, { 'x-switchyard-endpoint': at(dead) });
  // the fallback is round robin over [a, dead] here: the retry lands on a or fails on dead
  assert.equal(p.overrideStats.fallback - before0, 1, 'the retry went to the fallback policy');
  assert.ok(r.status === 200 ? r.backend === 'a' : r.status === 503);
});

test('override_host with retry_on 5xx: an upstream 503 is retried on the next listed host', async () => {
  const sick = await backend('sick', 503);
  try {
    const p = await proxy({ retry_on: '5xx', num_retries: 1 }, [sick.port, a.port]);
    const r = await get(p.listenPort, { 'x-switchyard-endpoint': `${at(sick)},${at(a)}` });
    assert.equal(r.backend, 'a');
    assert.equal(sick.hits, 1);
    // a condition not configured is not retried: connect-failure only, the 503 is the answer
    const q = await proxy({ retry_on: 'connect-failure', num_retries: 1 }, [sick.port, a.port]);
    assert.equal((await get(q.listenPort, { 'x-switchyard-endpoint': `${at(sick)},${at(a)}` })).status, 503);
  } finally {
    sick.server.close();
  }
});

test('the bootstrap parser: override_host needs a header source and a known fallback; metadata sources and both lb fields are refused', () => {
  const base = JSON.parse(config([1], undefined));
  const oh = () => base.static_resources.clusters[0].load_balancing_policy.policies[0].typed_extension_config.typed_config;
  assert.deepEqual(parseEnvoyConfig(JSON.stringify(base)).clusters.get('svc')!.overrideHost,
    { headers: ['x-switchyard-endpoint'], fallback: 'LEAST_REQUEST' });
  const save = structuredClone(base);
  oh().override_host_sources = [];
  assert.throws(() => parseEnvoyConfig(JSON.stringify(base)), /override_host_sources: at least one source/);
  oh().override_host_sources = [{ metadata: { key: 'envoy.lb', path: [{ key: 'x-gateway-destination-endpoint' }] } }];
  assert.throws(() => parseEnvoyConfig(JSON.stringify(base)), /metadata sources are not implemented/);
  oh().override_host_sources = [{}];
  assert.throws(() => parseEnvoyConfig(JSON.stringify(base)), /Empty override source/);
  Object.assign(base, structuredClone(save));
  delete oh().fallback_policy;
  assert.throws(() => parseEnvoyConfig(JSON.stringify(base)), /fallback_policy: required/);
  Object.assign(base, structuredClone(save));
  base.static_resources.clusters[0].lb_policy = 'ROUND_ROBIN';
  assert.throws(() => parseEnvoyConfig(JSON.stringify(base)), /either lb_policy or load_balancing_policy/);
  const r = JSON.parse(config([1], { retry_on: 'connect-failure,bogus' }));
  assert.throws(() => parseEnvoyConfig(JSON.stringify(r)), /retry_on: unsupported condition bogus/);
  assert.equal(parseEnvoyConfig(config([1], { retry_on: 'connect-failure' })).virtualHosts[0].routes[0].retry!.numRetries, 1, 'num_retries defaults to 1');
});
