// The local rig: envoy/envoy.yaml, envoy/plugin-config.json, envoy/agent.yaml,
// envoy/docker-compose.yml and agent/Dockerfile agree with each other, with
// docs/contracts.md, and with the filter / agent / compose schemas.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import {
  type Obj,
  checkAgentConfig,
  checkPluginConfig,
  composeSchemaValidator,
  contractFacts,
  p,
  readJson,
  readText,
  readYaml,
  sortKeys,
} from './helpers';

const C = contractFacts();
const envoy = readYaml('envoy/envoy.yaml');
const pluginConfig = readJson('envoy/plugin-config.json');
const agentYaml = readYaml('envoy/agent.yaml');
const compose = readYaml('envoy/docker-compose.yml');

const listener = envoy.static_resources.listeners[0];
const hcm = listener.filter_chains[0].filters[0];
const httpFilters: Obj[] = hcm.typed_config.http_filters;
const wasm = httpFilters.find((f) => f.name === 'envoy.filters.http.wasm')!;
const clusters: Obj[] = envoy.static_resources.clusters;
const cluster = (name: string): Obj => {
  const c = clusters.find((x) => x.name === name);
  assert.ok(c, `envoy.yaml: cluster ${name} missing`);
  return c;
};
const endpointOf = (c: Obj): Obj => c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
const allEndpoints = (c: Obj): Obj[] =>
  c.load_assignment.endpoints.flatMap((e: Obj) => e.lb_endpoints.map((le: Obj) => le.endpoint.address.socket_address));
const vhosts: Obj[] = hcm.typed_config.route_config.virtual_hosts;

// ------------------------------------------------------------------ Envoy

test('envoy.yaml: admin and listener on the contract ports', () => {
  assert.deepEqual(envoy.admin.address.socket_address, { address: '127.0.0.1', port_value: C.ports.admin });
  assert.equal(envoy.static_resources.listeners.length, 1);
  assert.deepEqual(listener.address.socket_address, { address: '0.0.0.0', port_value: C.ports.listener });
  assert.equal(hcm.name, 'envoy.filters.network.http_connection_manager');
  assert.equal(hcm.typed_config['@type'], 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager');
});

test('envoy.yaml: the Wasm filter runs right before the router, configured per contract', () => {
  assert.deepEqual(
    httpFilters.map((f) => f.name),
    ['envoy.filters.http.wasm', 'envoy.filters.http.router'],
  );
  assert.equal(httpFilters[1].typed_config['@type'], 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router');
  const tc = wasm.typed_config;
  assert.equal(tc['@type'], 'type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm');
  const cfg = tc.config;
  assert.equal(cfg.name, C.rootId);
  assert.equal(cfg.root_id, C.rootId);
  assert.equal(cfg.vm_config.vm_id, C.rootId);
  assert.equal(cfg.vm_config.runtime, 'envoy.wasm.runtime.v8');
  assert.deepEqual(cfg.vm_config.code, { local: { filename: '/etc/switchyard/switchyard.wasm' } });
  assert.equal(cfg.fail_open, false);
  assert.equal(cfg.configuration['@type'], 'type.googleapis.com/google.protobuf.StringValue');
});

test('envoy.yaml plugin configuration == envoy/plugin-config.json, and it is valid', () => {
  const embedded = JSON.parse(wasm.typed_config.config.configuration.value);
  assert.deepEqual(sortKeys(embedded), sortKeys(pluginConfig));
  assert.deepEqual(checkPluginConfig(pluginConfig), []);
});

test('ORIGINAL_DST is only reachable through a filter that strips client-sent endpoint headers', () => {
  // The filter removes a client-sent endpoint header only when loadAware is configured;
  // Envoy does not sanitize it. So any route to the ORIGINAL_DST cluster requires loadAware,
  // with the same header name as the cluster's http_header_name.
  const usesOd = vhosts.some((v) => v.routes.some((r: Obj) => r.route.cluster === C.originalDstCluster));
  if (!usesOd) return;
  assert.ok(pluginConfig.loadAware, 'plugin config needs a loadAware section (services may be empty)');
  // remote picks only: the local ones go to the service cluster's override_host policy
  assert.equal(pluginConfig.loadAware.remoteEndpointHeader, cluster(C.originalDstCluster).original_dst_lb_config.http_header_name);
  // Every route to ORIGINAL_DST requires the endpoint header (else Envoy would connect to the
  // downstream connection's local address, i.e. loop into this listener).
  for (const v of vhosts) {
    for (const r of v.routes.filter((x: Obj) => x.route.cluster === C.originalDstCluster)) {
      assert.ok((r.match.headers ?? []).some((h: Obj) => h.name === C.remoteEndpointHeader && h.present_match === true), `${r.name}: requires ${C.remoteEndpointHeader}`);
    }
  }
  for (const s of pluginConfig.loadAware.services) {
    for (const a of s.authorities) {
      if (!a.startsWith('*.')) assert.ok(vhosts.some((v) => v.domains.includes(a)), `no virtual host for load-aware authority ${a}`);
    }
  }
});

test('envoy.yaml clusters: names, types and loopback ports from the contract', () => {
  assert.deepEqual(clusters.map((c) => c.name).sort(), ['cloud_a', 'cloud_a_canary', 'cloud_b', C.agentCluster, C.originalDstCluster, C.inferenceDefaultCluster].sort());
  const agent = cluster(pluginConfig.agent.cluster);
  assert.equal(agent.name, C.agentCluster);
  assert.equal(agent.type, 'STATIC');
  assert.deepEqual(endpointOf(agent), { address: '127.0.0.1', port_value: C.ports.agent });
  assert.ok(parseFloat(agent.connect_timeout) <= 1, 'agent connect_timeout should be short');
  assert.deepEqual(endpointOf(cluster('cloud_a')), { address: '127.0.0.1', port_value: C.ports.cloudA });
  assert.deepEqual(endpointOf(cluster('cloud_a_canary')), { address: '127.0.0.1', port_value: C.ports.cloudACanary });
  assert.deepEqual(endpointOf(cluster('cloud_b')), { address: '127.0.0.1', port_value: C.ports.injector }, 'cloud_b goes through the leased-line injector');
  const od = cluster(C.originalDstCluster);
  assert.equal(od.type, 'ORIGINAL_DST');
  assert.equal(od.lb_policy, 'CLUSTER_PROVIDED');
  assert.equal(od.load_assignment, undefined);
  assert.deepEqual(od.original_dst_lb_config, { use_http_header: true, http_header_name: C.remoteEndpointHeader });
  // The regular cluster of the inference authority: the local instances of the contract, the
  // override_host policy on the filter's endpoint header, LEAST_REQUEST as its fallback.
  const inf = cluster(C.inferenceDefaultCluster);
  assert.equal(inf.type, 'STATIC');
  assert.equal(inf.lb_policy, undefined, 'load_balancing_policy supersedes lb_policy');
  const oh = inf.load_balancing_policy.policies[0].typed_extension_config;
  assert.equal(oh.name, 'envoy.load_balancing_policies.override_host');
  assert.deepEqual(oh.typed_config.override_host_sources, [{ header: C.endpointHeader }]);
  assert.match(oh.typed_config.fallback_policy.policies[0].typed_extension_config.typed_config['@type'], /least_request\.v3\.LeastRequest$/);
  assert.deepEqual(allEndpoints(inf), C.fleet.local.map((port) => ({ address: '127.0.0.1', port_value: port })));
  for (const c of clusters) {
    assert.match(c.connect_timeout, /^\d+(\.\d+)?s$/, `${c.name}: connect_timeout is a proto Duration`);
    if (c.load_assignment) {
      assert.equal(c.load_assignment.cluster_name, c.name);
      for (const ep of allEndpoints(c)) assert.equal(ep.address, '127.0.0.1', `${c.name}: rig runs on host networking`);
    }
  }
});

test('envoy.yaml routes mirror the seed VirtualService and reference existing clusters', () => {
  const pay = vhosts.find((v) => v.domains.includes(C.demoAuthority));
  assert.ok(pay, 'a virtual host for the demo authority');
  // Rule targets first (exact values of the filter-owned route header), then the link routes.
  // Fail-safe: only the filter's explicit "normal" splits; the default route is local.
  assert.equal(pay.routes.length, 5);
  const rules = pay.routes.slice(0, 3);
  assert.deepEqual(rules.map((r: Obj) => [r.match.headers[0].name, r.match.headers[0].string_match.exact, r.route.cluster]),
    [['x-switchyard-route', 'dc1', 'cloud_a'], ['x-switchyard-route', 'dc2', 'cloud_b'], ['x-switchyard-route', 'dc1-canary', 'cloud_a_canary']]);
  for (const r of rules) assert.equal(r.match.prefix, '/');
  const [split, local] = pay.routes.slice(3);
  assert.deepEqual(split.match, { prefix: '/', headers: [{ name: pluginConfig.link.header, string_match: { exact: 'normal' } }] });
  assert.equal(pluginConfig.link.header, C.statusHeader);
  assert.deepEqual(split.route, { weighted_clusters: { clusters: [{ name: 'cloud_a', weight: 50 }, { name: 'cloud_b', weight: 50 }] } });
  assert.deepEqual(local.match, { prefix: '/' });
  assert.deepEqual(local.route, { cluster: 'cloud_a' });
  // Every authority the filter manages has a virtual host.
  for (const svc of pluginConfig.link.services) {
    for (const a of svc.authorities) {
      if (a.startsWith('*.')) continue;
      assert.ok(vhosts.some((v) => v.domains.includes(a)), `no virtual host for ${a}`);
    }
  }
  // The load-aware authority: degraded marker -> regular cluster, remote endpoint -> ORIGINAL_DST,
  // endpoint -> regular cluster (override_host, with retries), anything else -> regular cluster
  // (docs/contracts.md names; header names from the plugin config).
  const inf = vhosts.find((v) => v.domains.includes(C.inferenceAuthority));
  assert.ok(inf, `a virtual host for ${C.inferenceAuthority}`);
  assert.ok(inf.domains.includes(`${C.inferenceAuthority}:*`), 'with any port');
  const la = pluginConfig.loadAware;
  assert.equal(la.degradedHeader, C.degradedHeader);
  assert.equal(la.endpointHeader, C.endpointHeader);
  assert.equal(la.remoteEndpointHeader, C.remoteEndpointHeader);
  assert.deepEqual(inf.routes.map((r: Obj) => r.match), [
    { prefix: '/', headers: [{ name: C.degradedHeader, string_match: { exact: 'true' } }] },
    { prefix: '/', headers: [{ name: C.remoteEndpointHeader, present_match: true }] },
    { prefix: '/', headers: [{ name: C.endpointHeader, present_match: true }] },
    { prefix: '/' },
  ]);
  assert.deepEqual(inf.routes.map((r: Obj) => r.route.cluster), [C.inferenceDefaultCluster, C.originalDstCluster, C.inferenceDefaultCluster, C.inferenceDefaultCluster]);
  assert.ok(inf.routes[2].route.retry_policy.num_retries >= 1, 'a picked request is retried on the next listed instance');
  assert.ok(la.services[0].fallbacks >= inf.routes[2].route.retry_policy.num_retries, 'one listed fallback per retry');
  for (const r of inf.routes) assert.match(r.route.timeout, /^\d+s$/, `${r.name}: explicit timeout (Envoy's route default is 15 s)`);
  const names = new Set(clusters.map((c) => c.name));
  for (const v of vhosts) {
    for (const r of v.routes) {
      const targets = r.route.cluster ? [r.route.cluster] : r.route.weighted_clusters.clusters.map((c: Obj) => c.name);
      for (const t of targets) assert.ok(names.has(t), `route ${r.name} -> unknown cluster ${t}`);
    }
  }
});

test('wherever allIneligible is forward-degraded, the degraded marker routes to a regular cluster first', () => {
  // forward-degraded (the default) sends requests with no endpoint header and degradedHeader:
  // true; the route table must catch that marker before any ORIGINAL_DST route, and send it to a
  // cluster with real endpoints. reject-503 never forwards, so it needs no such route.
  const la = pluginConfig.loadAware;
  const degraded = la.degradedHeader ?? 'x-degraded';
  const forwarding = la.services.filter((s: Obj) => (s.allIneligible ?? 'forward-degraded') === 'forward-degraded');
  assert.ok(forwarding.length > 0, 'the rig exercises forward-degraded');
  for (const svc of forwarding) {
    for (const a of svc.authorities.filter((x: string) => !x.startsWith('*.'))) {
      const vh = vhosts.find((v) => v.domains.includes(a));
      assert.ok(vh, `no virtual host for ${a}`);
      const iDeg = vh.routes.findIndex((r: Obj) =>
        (r.match.headers ?? []).some((h: Obj) => h.name === degraded && h.string_match?.exact === 'true'));
      const iOd = vh.routes.findIndex((r: Obj) => r.route.cluster === C.originalDstCluster);
      assert.ok(iDeg >= 0, `${a}: no route for ${degraded}: true`);
      assert.ok(iOd < 0 || iDeg < iOd, `${a}: the ${degraded} route must come before the ORIGINAL_DST route`);
      const target = cluster(vh.routes[iDeg].route.cluster);
      assert.notEqual(target.type, 'ORIGINAL_DST', `${a}: degraded requests carry no endpoint`);
      assert.ok(allEndpoints(target).length > 0, `${a}: the degraded route's cluster has endpoints`);
    }
  }
});

test('envoy.yaml stays in the embedded host subset and uses no deprecated fields', () => {
  const MATCH_KEYS = new Set(['prefix', 'path', 'headers']);
  const HDR_KEYS = new Set(['name', 'string_match', 'present_match']);
  const ROUTE_KEYS = new Set(['cluster', 'weighted_clusters', 'timeout', 'retry_policy']);
  for (const v of vhosts) {
    for (const r of v.routes) {
      for (const k of Object.keys(r.match)) assert.ok(MATCH_KEYS.has(k), `${r.name}: match.${k}`);
      for (const h of r.match.headers ?? []) {
        for (const k of Object.keys(h)) assert.ok(HDR_KEYS.has(k), `${r.name}: header matcher ${k}`);
        if (h.string_match) assert.deepEqual(Object.keys(h.string_match), ['exact']);
        if ('present_match' in h) assert.equal(h.present_match, true);
        assert.equal(h.name, h.name.toLowerCase());
      }
      for (const k of Object.keys(r.route)) assert.ok(ROUTE_KEYS.has(k), `${r.name}: route.${k}`);
      if (r.route.timeout !== undefined) assert.match(r.route.timeout, /^\d+(\.\d+)?s$/, `${r.name}: timeout is a proto Duration`);
      if (r.route.weighted_clusters) assert.deepEqual(Object.keys(r.route.weighted_clusters), ['clusters']);
    }
  }
  for (const c of clusters) {
    assert.ok(['STATIC', 'STRICT_DNS', 'LOGICAL_DNS', 'ORIGINAL_DST'].includes(c.type), `${c.name}: type ${c.type}`);
    if (c.load_balancing_policy) assert.equal(c.lb_policy, undefined, `${c.name}: lb_policy or load_balancing_policy`);
    else assert.ok(['ROUND_ROBIN', 'RANDOM', 'LEAST_REQUEST', 'CLUSTER_PROVIDED'].includes(c.lb_policy), `${c.name}: lb_policy ${c.lb_policy}`);
  }
  // Deprecated v3 fields (the docs' replacements in parentheses) must not appear.
  const deprecated = new Map([
    ['exact_match', 'string_match.exact'],
    ['prefix_match', 'string_match.prefix'],
    ['suffix_match', 'string_match.suffix'],
    ['contains_match', 'string_match.contains'],
    ['safe_regex_match', 'string_match.safe_regex'],
    ['hosts', 'load_assignment'],
    ['access_log_path', 'admin.access_log'],
    ['total_weight', 'sum of weights'],
    ['tls_context', 'transport_socket'],
  ]);
  const walk = (v: unknown, path: string): void => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`));
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        assert.ok(!deprecated.has(k), `${path}.${k} is deprecated (use ${deprecated.get(k)})`);
        walk(x, `${path}.${k}`);
      }
    }
  };
  walk(envoy, 'envoy');
});

test('envoy.yaml uses only field names that exist in the Envoy v3 messages it configures', () => {
  // Field names per message, from the v3 API reference pages for exactly the
  // messages used here; a typo (e.g. `conect_timeout`) fails.
  const FIELDS: Record<string, string[]> = {
    bootstrap: ['admin', 'static_resources'],
    admin: ['address'],
    static_resources: ['listeners', 'clusters'],
    listener: ['name', 'address', 'filter_chains'],
    hcm: ['@type', 'stat_prefix', 'codec_type', 'route_config', 'http_filters'],
    route_config: ['name', 'virtual_hosts'],
    virtual_host: ['name', 'domains', 'routes'],
    route: ['name', 'match', 'route'],
    route_action: ['cluster', 'weighted_clusters', 'timeout', 'retry_policy'],
    wasm_plugin: ['name', 'root_id', 'vm_config', 'configuration', 'fail_open'],
    vm_config: ['vm_id', 'runtime', 'code'],
    cluster: ['name', 'type', 'connect_timeout', 'lb_policy', 'load_balancing_policy', 'load_assignment', 'original_dst_lb_config'],
  };
  const only = (o: Obj, kind: string, where: string): void => {
    for (const k of Object.keys(o)) assert.ok(FIELDS[kind].includes(k), `${where}: unknown field ${k}`);
  };
  only(envoy, 'bootstrap', 'bootstrap');
  only(envoy.admin, 'admin', 'admin');
  only(envoy.static_resources, 'static_resources', 'static_resources');
  only(listener, 'listener', 'listener');
  only(hcm.typed_config, 'hcm', 'http_connection_manager');
  only(hcm.typed_config.route_config, 'route_config', 'route_config');
  for (const v of vhosts) {
    only(v, 'virtual_host', v.name);
    for (const r of v.routes) {
      only(r, 'route', r.name);
      only(r.route, 'route_action', `${r.name}.route`);
    }
  }
  only(wasm.typed_config.config, 'wasm_plugin', 'wasm PluginConfig');
  only(wasm.typed_config.config.vm_config, 'vm_config', 'wasm VmConfig');
  for (const c of clusters) only(c, 'cluster', c.name);
});

// ------------------------------------------------------------------ agent

test('envoy/agent.yaml: valid for agent/config.schema.json and wired to the rig', () => {
  assert.deepEqual(checkAgentConfig(agentYaml), []);
  assert.deepEqual(agentYaml.listen, { host: '127.0.0.1', port: C.ports.agent });
  assert.equal(agentYaml.link.peers.length, 1);
  const peer = agentYaml.link.peers[0];
  assert.equal(peer.name, C.peer);
  assert.deepEqual([...new Set(pluginConfig.link.services.map((s: Obj) => s.peer))], [peer.name], 'the filter watches the peer the agent probes');
  assert.equal(peer.probe.kind, 'http');
  assert.equal(peer.probe.url, `http://127.0.0.1:${C.ports.injector}/healthz`, 'probe goes through the leased-line injector');
  assert.equal(peer.intervalMs, 100);
  assert.equal(peer.degradeThresholdMs, 50);
  assert.equal(peer.degradeAfter, 1);
  assert.equal(peer.recoverThresholdMs, 40);
  assert.equal(peer.recoverAfter, 10);
  assert.ok(peer.recoverThresholdMs <= peer.degradeThresholdMs);
});

test('envoy/agent.yaml inference: the contract fleet, under the service the filter chooses among', () => {
  const inf = agentYaml.inference;
  assert.ok(inf, 'agent.yaml has an inference section');
  assert.equal(inf.scrapeIntervalMs, 500);
  const services: Obj[] = inf.services;
  // (service, addr, peer) as the agent will publish them = the contract's snapshot view.
  const published = services.flatMap((s) => s.instances.static.map((addr: string) => ({ service: s.name, addr, peer: s.peer ?? '' })));
  assert.deepEqual(published, C.fleet.instances.map((i) => ({ service: C.fleet.service, ...i })));
  for (const s of services) {
    assert.equal(s.kind, 'vllm');
    assert.equal(s.concurrency, 4);
  }
  // Remote instances: the address is the second injector, which forwards to the remote instance.
  const remote = published.filter((i) => i.peer !== '');
  assert.deepEqual(remote.map((i) => i.addr), [`127.0.0.1:${C.fleet.remoteInjector}`]);
  assert.equal(C.fleet.remoteInjectorTarget, C.fleet.remote);
  // The filter skips a remote instance unless the snapshot says the link to its peer is normal;
  // a peer the agent does not probe is never in the snapshot (-> link.failMode, always skipped).
  const probed = agentYaml.link.peers.map((x: Obj) => x.name);
  for (const i of remote) assert.ok(probed.includes(i.peer), `inference peer ${i.peer} is probed by the agent`);
  // Every service the filter chooses for exists in the agent's inference config.
  const names = new Set(services.map((x) => x.name));
  for (const s of pluginConfig.loadAware.services) assert.ok(names.has(s.service), `agent scrapes no service "${s.service}"`);
  assert.deepEqual(pluginConfig.loadAware.services.map((s: Obj) => [s.authorities, s.service]), [[[C.inferenceAuthority], C.fleet.service]]);
  // The regular cluster holds exactly the local instances.
  const local = published.filter((i) => i.peer === '').map((i) => i.addr);
  assert.deepEqual(allEndpoints(cluster(C.inferenceDefaultCluster)).map((e) => `${e.address}:${e.port_value}`), local);
  // Staleness: the filter's per-service limit is not below the agent's own (both 5 s here), and
  // both leave room for several scrape intervals.
  const staleAfter = inf.staleAfterMs ?? 5000;
  for (const s of pluginConfig.loadAware.services) {
    const filterStale = s.stalenessMs ?? 5000;
    assert.ok(filterStale >= staleAfter, `${s.service}: filter stalenessMs ${filterStale} < agent staleAfterMs ${staleAfter}`);
    assert.ok(filterStale >= 4 * inf.scrapeIntervalMs, `${s.service}: stalenessMs leaves room for several scrapes`);
  }
});

// ------------------------------------------------------------------ compose

const svc = (name: string): Obj => {
  const s = compose.services[name];
  assert.ok(s, `docker-compose.yml: service ${name} missing`);
  return s;
};
const flag = (cmd: string[], f: string): string => {
  const i = cmd.indexOf(f);
  assert.ok(i >= 0 && i + 1 < cmd.length, `command lacks ${f}: ${cmd.join(' ')}`);
  return cmd[i + 1];
};

test('docker-compose.yml is valid for the compose-spec schema', () => {
  const v = composeSchemaValidator();
  assert.ok(v(compose), JSON.stringify(v.errors, null, 2));
  // Self-test: the schema does reject a misspelt key.
  const bad = structuredClone(compose);
  bad.services.envoy.healtcheck = bad.services.envoy.healthcheck;
  assert.equal(v(bad), false, 'compose schema should reject unknown service keys');
});

test('compose: host networking and a healthcheck everywhere; Envoy pinned', () => {
  assert.deepEqual(Object.keys(compose.services).sort(), [
    'agent', 'cloud-a', 'cloud-a-canary', 'cloud-b', 'envoy',
    'inference-a1', 'inference-a2', 'inference-a3', 'inference-a4', 'inference-b1',
    'leased-line', 'leased-line-inference',
  ]);
  for (const [name, s] of Object.entries<Obj>(compose.services)) {
    assert.equal(s.network_mode, 'host', `${name}: network_mode`);
    assert.ok(Array.isArray(s.healthcheck?.test) && s.healthcheck.test[0] === 'CMD', `${name}: healthcheck`);
    for (const d of Object.keys(s.depends_on ?? {})) assert.ok(compose.services[d], `${name} depends on unknown ${d}`);
  }
  const m = /^envoyproxy\/envoy:v1\.(\d+)\.(\d+)$/.exec(svc('envoy').image);
  assert.ok(m, `envoy image must be a pinned official release tag, got ${svc('envoy').image}`);
  assert.ok(Number(m[1]) >= 28, 'Envoy >= 1.28');
});

test('compose: Envoy mounts the config and the wasm where envoy.yaml expects them', () => {
  const e = svc('envoy');
  const cfgPath = flag(e.command, '-c');
  assert.ok(e.volumes.includes(`./envoy.yaml:${cfgPath}:ro`));
  const wasmPath = wasm.typed_config.config.vm_config.code.local.filename;
  assert.ok(e.volumes.includes(`../build/switchyard.wasm:${wasmPath}:ro`), 'wasm mounted read-only at the filter path');
  assert.ok(e.healthcheck.test.join(' ').includes(`/dev/tcp/127.0.0.1/${C.ports.admin}`));
});

test('compose: simulators and agent use the contract ports and the rig configs', (t) => {
  const a = svc('cloud-a').command;
  const b = svc('cloud-b').command;
  const ll = svc('leased-line').command;
  assert.deepEqual(a.slice(0, 2), ['node_modules/.bin/tsx', 'sim/cloud-service.ts']);
  assert.equal(flag(a, '--name'), 'cloud-a');
  assert.equal(Number(flag(a, '--port')), C.ports.cloudA);
  assert.equal(Number(flag(a, '--port')), endpointOf(cluster('cloud_a')).port_value);
  assert.equal(flag(b, '--name'), 'cloud-b');
  assert.equal(Number(flag(b, '--port')), C.ports.cloudB);
  assert.deepEqual(ll.slice(0, 2), ['node_modules/.bin/tsx', 'sim/leased-line.ts']);
  assert.equal(Number(flag(ll, '--listen')), C.ports.injector);
  assert.equal(Number(flag(ll, '--listen')), endpointOf(cluster('cloud_b')).port_value);
  assert.equal(flag(ll, '--target'), `127.0.0.1:${C.ports.injectorTarget}`);
  assert.equal(C.ports.injectorTarget, C.ports.cloudB);
  assert.equal(Number(flag(ll, '--control')), C.ports.control);
  for (const [name, port] of [['cloud-a', C.ports.cloudA], ['cloud-b', C.ports.cloudB], ['leased-line', C.ports.control], ['agent', C.ports.agent]] as const) {
    assert.ok(svc(name).healthcheck.test.join(' ').includes(String(port)), `${name}: healthcheck port`);
  }
  for (const f of ['sim/cloud-service.ts', 'sim/leased-line.ts']) {
    assert.ok(existsSync(p(f)), `${f}: compose references it`);
  }
  const ag = svc('agent');
  assert.deepEqual(ag.build, { context: '..', dockerfile: 'agent/Dockerfile' });
  assert.ok(existsSync(p('agent/Dockerfile')));
  assert.equal(ag.command[0], 'build/agent.js');
  assert.equal(flag(ag.command, '--config'), 'envoy/agent.yaml');
  assert.ok(ag.volumes.includes('./agent.yaml:/app/envoy/agent.yaml:ro'));
  assert.ok(ag.healthcheck.test.join(' ').includes(`http://127.0.0.1:${agentYaml.listen.port}/healthz`));
});

test('compose: the inference fleet and its injector use the contract ports, the agent\'s kind and slots', () => {
  const simSrc = readText('sim/inference-server.ts');
  const known = new Set(JSON.parse(/const known = new Set\((\[[^\]]*\])\)/.exec(simSrc)![1].replace(/'/g, '"')));
  const inferenceSvc = (name: string): Obj => {
    const s = svc(name);
    assert.deepEqual(s.command.slice(0, 2), ['node_modules/.bin/tsx', 'sim/inference-server.ts'], `${name}: runs the simulator`);
    for (const f of s.command.slice(2).filter((x: string) => x.startsWith('--'))) assert.ok(known.has(f.slice(2)), `${name}: the simulator has no option ${f}`);
    return s;
  };
  const agentSvc = (peer: string): Obj => agentYaml.inference.services.find((x: Obj) => (x.peer ?? '') === peer);
  const local = ['inference-a1', 'inference-a2', 'inference-a3', 'inference-a4'].map(inferenceSvc);
  assert.deepEqual(local.map((s) => Number(flag(s.command, '--port'))), C.fleet.local);
  assert.deepEqual(local.map((s) => Number(flag(s.command, '--speed'))), C.fleet.speeds, 'heterogeneous speeds from the contract');
  const remote = inferenceSvc('inference-b1');
  assert.equal(Number(flag(remote.command, '--port')), C.fleet.remote);
  const all = [...local, remote];
  for (const [s, peer] of all.map((x, i) => [x, i < local.length ? '' : C.peer] as const)) {
    assert.equal(flag(s.command, '--kind'), agentSvc(peer).kind, 'metrics style the agent parses');
    assert.equal(Number(flag(s.command, '--concurrency')), agentSvc(peer).concurrency, 'slots the agent assumes');
    assert.ok(s.healthcheck.test.join(' ').includes(`http://127.0.0.1:${flag(s.command, '--port')}/healthz`));
  }
  assert.equal(new Set(all.map((s) => flag(s.command, '--seed'))).size, all.length, 'distinct seeds');
  const ll = svc('leased-line-inference');
  assert.deepEqual(ll.command.slice(0, 2), ['node_modules/.bin/tsx', 'sim/leased-line.ts']);
  assert.equal(Number(flag(ll.command, '--listen')), C.fleet.remoteInjector);
  assert.equal(flag(ll.command, '--target'), `127.0.0.1:${C.fleet.remoteInjectorTarget}`);
  assert.equal(Number(flag(ll.command, '--control')), C.fleet.remoteControl);
  assert.ok(ll.healthcheck.test.join(' ').includes(String(C.fleet.remoteControl)));
  assert.equal(ll.depends_on['inference-b1'].condition, 'service_healthy');
});

test('rig ports: one owner per port across contracts.md, compose, envoy.yaml and agent.yaml', () => {
  const owners = new Map<number, string[]>();
  const own = (port: number, who: string): void => {
    owners.set(port, [...(owners.get(port) ?? []), who]);
  };
  for (const [name, s] of Object.entries<Obj>(compose.services)) {
    const cmd: string[] = s.command ?? [];
    for (const f of ['--port', '--listen', '--control']) if (cmd.includes(f)) own(Number(flag(cmd, f)), `${name} ${f}`);
  }
  own(agentYaml.listen.port, 'agent');
  own(listener.address.socket_address.port_value, 'envoy listener');
  own(envoy.admin.address.socket_address.port_value, 'envoy admin');
  for (const [port, who] of owners) assert.equal(who.length, 1, `port ${port} used by ${who.join(', ')}`);
  // Every contract port has its owner in compose.
  const contractPorts = [
    ...Object.entries(C.ports).filter(([k]) => k !== 'injectorTarget').map(([, v]) => v),
    ...C.fleet.local, C.fleet.remote, C.fleet.remoteInjector, C.fleet.remoteControl,
  ];
  for (const port of contractPorts) assert.ok(owners.has(port), `contract port ${port} has no service in compose`);
  assert.equal(owners.size, contractPorts.length, `compose uses ports the contract does not list: ${[...owners.keys()].filter((x) => !contractPorts.includes(x))}`);
});

// ------------------------------------------------------------------ Dockerfile

test('agent/Dockerfile: multi-stage esbuild bundle, non-root runtime, /healthz check', () => {
  const df = readText('agent/Dockerfile');
  const froms = [...df.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)];
  assert.ok(froms.length >= 2, 'multi-stage');
  const finalStage = df.slice(df.lastIndexOf('\nFROM '));
  const user = /^USER\s+(\S+)/m.exec(finalStage);
  assert.ok(user && !['root', '0', '0:0'].includes(user[1]), 'runtime stage runs as a non-root user');
  assert.match(finalStage, /HEALTHCHECK[\s\S]*\/healthz/);
  // The bundle comes from the project's build:agent script, which must write build/agent.js.
  assert.match(df, /^RUN npm run build:agent\b/m);
  const pkg = JSON.parse(readText('package.json'));
  const script: string = pkg.scripts?.['build:agent'] ?? '';
  assert.ok(script, 'package.json has a build:agent script');
  const m = /(?:tsx|node)\s+(\S+\.[jt]s)/.exec(script);
  assert.ok(m && existsSync(p(m[1])), `build:agent entry ${m?.[1]} exists`);
  const buildSrc = readText(m[1]);
  assert.match(buildSrc, /build\/agent\.js/, 'build:agent writes build/agent.js');
  assert.match(buildSrc, /bundle:\s*true/);
  for (const m of df.matchAll(/^COPY\s+(?!--from)(.+)\s+\S+$/gm)) {
    for (const src of m[1].trim().split(/\s+/)) assert.ok(existsSync(p(src)), `COPY source ${src} exists in the repository`);
  }
  const args = JSON.parse(/^CMD\s+(\[.*\])$/m.exec(finalStage)![1]);
  assert.equal(args[0], 'build/agent.js');
});

test("rig --once verdict: fails when the normal or restored phase is mostly degraded, not only when the slow phase leaks", async () => {
  const { judgeOnce } = await import('../../rig/verdict');
  const good = { normal: { cloudB: 95, total: 199, degraded: 0 }, slow: { cloudB: 0, total: 180, degraded: 180 }, restored: { cloudB: 120, total: 250, degraded: 12 } };
  assert.deepEqual(judgeOnce(good), { ok: true, problems: [] });
  // The starved run of issue 8: 141 of 183 degraded in "normal", 154 of 267 in "restored".
  const starvedNormal = judgeOnce({ ...good, normal: { cloudB: 20, total: 183, degraded: 141 } });
  assert.equal(starvedNormal.ok, false);
  assert.match(starvedNormal.problems.join(), /normal: mostly degraded \(141 of 183\)/);
  const starvedRestored = judgeOnce({ ...good, restored: { cloudB: 50, total: 267, degraded: 154 } });
  assert.equal(starvedRestored.ok, false);
  assert.match(starvedRestored.problems.join(), /restored: mostly degraded \(154 of 267\)/);
  // Exactly half is tolerated (the restored phase includes the recovery), more is not.
  assert.equal(judgeOnce({ ...good, restored: { cloudB: 50, total: 100, degraded: 50 } }).ok, true);
  assert.equal(judgeOnce({ ...good, restored: { cloudB: 50, total: 100, degraded: 51 } }).ok, false);
  // What the old verdict already caught still fails.
  assert.equal(judgeOnce({ ...good, slow: { cloudB: 1, total: 180, degraded: 180 } }).ok, false);
  assert.equal(judgeOnce({ ...good, slow: { cloudB: 0, total: 180, degraded: 179 } }).ok, false);
  assert.equal(judgeOnce({ ...good, normal: { cloudB: 0, total: 199, degraded: 0 } }).ok, false);
  assert.equal(judgeOnce({ ...good, restored: { cloudB: 0, total: 0, degraded: 0 } }).ok, false);
  // rig/main.ts uses it for --once.
  assert.match(readText('rig/main.ts'), /judgeOnce\(verdict/);
});
