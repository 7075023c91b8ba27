// Istio packaging: every kustomization renders (with the in-test renderer, and
// identically with `kubectl kustomize` when kubectl exists), every object is
// valid for the Istio/Kubernetes schemas and has no unknown fields, and the
// manifests agree with the filter schema, the agent schema, envoy/envoy.yaml
// and docs/contracts.md.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ISTIO_PLUGIN_CONFIG_DIFFERENCES,
  KUSTOMIZATIONS,
  type Obj,
  checkAgentConfig,
  checkPluginConfig,
  contractFacts,
  jsonDiffPaths,
  kubectlKustomize,
  parseYamlDocs,
  patchedVhostRoutes,
  readJson,
  readText,
  readYaml,
  renderKustomization,
  resKey,
  sortKeys,
  unknownFieldProblems,
  validateWithModel,
  valueAt,
} from './helpers';

const C = contractFacts();
const rendered = new Map<string, Obj[]>(KUSTOMIZATIONS.map((k) => [k, renderKustomization(k)]));
const find = (objs: Obj[], kind: string, name?: string, ns?: string): Obj[] =>
  objs.filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name) && (ns === undefined || o.metadata?.namespace === ns));
const one = (objs: Obj[], kind: string, name?: string, ns?: string): Obj => {
  const hits = find(objs, kind, name, ns);
  assert.equal(hits.length, 1, `expected exactly one ${kind}${name ? ' ' + name : ''}${ns ? ' in ' + ns : ''}, got ${hits.length}`);
  return hits[0];
};
/** The ECDS Wasm config an EnvoyFilter delivers (istio/options/inference), or undefined. */
const ecdsWasm = (objs: Obj[]): Obj | undefined => find(objs, 'EnvoyFilter').flatMap((ef) => ef.spec.configPatches)
  .find((cp: Obj) => cp.applyTo === 'EXTENSION_CONFIG')?.patch.value;
/** Every plugin configuration of the filter a kustomization ships: WasmPlugins' and the ECDS one. */
const pluginConfigsOf = (objs: Obj[]): Obj[] => [
  ...find(objs, 'WasmPlugin').map((w) => w.spec.pluginConfig),
  ...[ecdsWasm(objs)].filter((x): x is Obj => !!x).map((e) => JSON.parse(e.typed_config.config.configuration.value)),
];

const clusterPatches = (objs: Obj[]): Obj[] =>
  find(objs, 'EnvoyFilter').flatMap((ef) => ef.spec.configPatches.filter((cp: Obj) => cp.applyTo === 'CLUSTER').map((cp: Obj) => cp.patch.value));

test('renderer output equals kubectl kustomize', () => {
  for (const k of KUSTOMIZATIONS) {
    const ours = rendered.get(k)!;
    const theirs = kubectlKustomize(k);
    const norm = (objs: Obj[]): Map<string, string> => new Map(objs.map((o) => [resKey(o), JSON.stringify(sortKeys(o))]));
    const a = norm(ours);
    const b = norm(theirs);
    assert.deepEqual([...a.keys()].sort(), [...b.keys()].sort(), `${k}: resource sets differ`);
    for (const [key, v] of a) assert.equal(v, b.get(key), `${k}: ${key} differs from kubectl kustomize`);
  }
});

test('every rendered object validates against the Istio/Kubernetes models', async () => {
  for (const [k, objs] of rendered) {
    assert.ok(objs.length > 0, `${k} renders nothing`);
    for (const o of objs) {
      await assert.doesNotReject(validateWithModel(o), `${k}: ${resKey(o)}`);
    }
  }
});

test('no unknown fields anywhere (type-checked against the model interfaces)', () => {
  const all = new Map<string, Obj>();
  for (const objs of rendered.values()) for (const o of objs) all.set(JSON.stringify(sortKeys(o)), o);
  const problems = unknownFieldProblems([...all.values()]);
  assert.deepEqual(problems, []);
});

test('the unknown-field check really catches typos (self-test)', async () => {
  const wp = structuredClone(one(rendered.get('istio/base')!, 'WasmPlugin'));
  wp.spec.failStratgy = 'FAIL_OPEN';
  const problems = unknownFieldProblems([wp]);
  assert.ok(problems.some((m) => /failStratgy/.test(m)), problems.join('\n'));
  // ...which the model validator alone would not:
  await validateWithModel(wp);
});

test('WasmPlugin: pinned OCI image, explicit fail strategy, outbound HTTP, plugin config valid', () => {
  for (const [k, objs] of rendered) {
    for (const wp of find(objs, 'WasmPlugin')) {
      const s = wp.spec;
      assert.match(s.url, /^oci:\/\/[^@]+:[A-Za-z0-9_][A-Za-z0-9._-]*$/, `${k}: url must be an oci:// reference with a tag`);
      assert.match(s.sha256, /^[a-f0-9]{64}$/, `${k}: sha256`);
      assert.ok(new Set(s.sha256).size > 4, `${k}: sha256 looks like a placeholder`);
      assert.match(wp.metadata.annotations['switchyard.io/wasm-sha256'], /^[a-f0-9]{64}$/);
      assert.ok(['IfNotPresent', 'Always'].includes(s.imagePullPolicy), `${k}: imagePullPolicy`);
      assert.equal(s.failStrategy, 'FAIL_CLOSE', `${k}: failStrategy`);
      assert.equal(s.type, 'HTTP');
      assert.deepEqual(s.match, [{ mode: 'CLIENT' }]);
      assert.equal(s.pluginName, C.rootId);
      assert.ok(['AUTHN', 'AUTHZ', 'STATS', 'UNSPECIFIED_PHASE'].includes(s.phase) && Number.isInteger(s.priority));
      assert.equal(s.selector.matchLabels['switchyard.io/enabled'], 'true');
      assert.deepEqual(checkPluginConfig(s.pluginConfig), [], `${k}: pluginConfig`);
      assert.equal(s.pluginConfig.agent.cluster, C.agentCluster);
      assert.equal(s.pluginConfig.link.header ?? 'x-cross-cloud-status', C.statusHeader);
    }
  }
});

test('all overlays pin the same image digest as the base (only the registry differs)', () => {
  const base = one(rendered.get('istio/base')!, 'WasmPlugin');
  for (const k of ['istio/overlays/cloud-a', 'istio/overlays/cloud-b']) {
    const wp = one(rendered.get(k)!, 'WasmPlugin');
    assert.equal(wp.spec.sha256, base.spec.sha256, k);
    assert.equal(wp.spec.url.split('/').slice(3).join('/'), base.spec.url.split('/').slice(3).join('/'), `${k}: repository path/tag`);
  }
});

test('the plugin config of the base equals the rig config, except the documented differences', () => {
  const wp = one(rendered.get('istio/base')!, 'WasmPlugin');
  const rig = readJson('envoy/plugin-config.json');
  const istio = wp.spec.pluginConfig;
  const diffs = jsonDiffPaths(rig, istio);
  for (const path of diffs) {
    const allowed = ISTIO_PLUGIN_CONFIG_DIFFERENCES.find((d) => d.path.test(path));
    assert.ok(allowed, `pluginConfig differs from envoy/plugin-config.json at ${path} (not an allowed difference)`);
    assert.ok(allowed.istio(valueAt(istio, path)), `${path}: Istio value ${JSON.stringify(valueAt(istio, path))} is not the allowed one (${allowed.why})`);
  }
  // The allow-list is not dead weight: the rig does use the debug header, Istio does not.
  assert.ok(diffs.some((d) => /\.debug$/.test(d)), 'expected the debug difference');
  for (const [k, objs] of rendered) {
    for (const w of find(objs, 'WasmPlugin')) {
      for (const svc of w.spec.pluginConfig.loadAware?.services ?? []) assert.notEqual(svc.debug, true, `${k}: debug header in production`);
    }
  }
});

test('EnvoyFilters add the agent and ORIGINAL_DST clusters under the contract names', () => {
  const rig = readYaml('envoy/envoy.yaml');
  const rigCluster = (name: string): Obj => rig.static_resources.clusters.find((c: Obj) => c.name === name);
  for (const [k, objs] of rendered) {
    if (!find(objs, 'EnvoyFilter').length) continue;
    for (const ef of find(objs, 'EnvoyFilter')) {
      assert.equal(ef.spec.workloadSelector.labels['switchyard.io/enabled'], 'true', `${k}: ${ef.metadata.name} selector`);
      for (const cp of ef.spec.configPatches) {
        assert.equal(cp.match.context, 'SIDECAR_OUTBOUND', `${k}: ${ef.metadata.name} context`);
        // ADD our own clusters; MERGE only into Istio's service cluster (the override_host policy)
        if (cp.applyTo === 'CLUSTER') assert.ok(cp.patch.operation === 'ADD' || (cp.patch.operation === 'MERGE' && cp.match.cluster?.service), `${k}: ${ef.metadata.name} cluster patch`);
      }
    }
    const clusters = clusterPatches(objs).filter((c) => c.name !== undefined);
    const agent = clusters.find((c) => c.name === C.agentCluster);
    assert.ok(agent, `${k}: no ${C.agentCluster} cluster`);
    const addr = agent.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
    assert.equal(addr.port_value, C.ports.agent, `${k}: agent port`);
    assert.equal(agent.load_assignment.cluster_name, C.agentCluster);
    // the mesh option builds on the DaemonSet option: node agents behind the node-local Service
    if (k === 'istio/options/agent-daemonset' || k === 'istio/options/mesh') {
      assert.equal(agent.type, 'STRICT_DNS');
      const svc = one(objs, 'Service', 'switchyard-agent');
      assert.equal(addr.address, `${svc.metadata.name}.${svc.metadata.namespace}.svc.cluster.local`);
      assert.equal(svc.spec.internalTrafficPolicy, 'Local');
      assert.equal(svc.spec.ports[0].port, C.ports.agent);
    } else {
      // Sidecar mode: identical to the rig's cluster.
      assert.deepEqual(sortKeys(agent), sortKeys(rigCluster(C.agentCluster)), `${k}: agent cluster differs from envoy/envoy.yaml`);
    }
    const od = clusters.find((c) => c.name === C.originalDstCluster);
    assert.ok(od, `${k}: no ${C.originalDstCluster}`);
    // The filter strips client-sent endpoint headers only with loadAware configured.
    for (const wp of find(objs, 'WasmPlugin')) {
      assert.ok(wp.spec.pluginConfig.loadAware, `${k}: the ORIGINAL_DST route needs loadAware in the plugin config`);
      // remote picks only: the filter writes this header for instances of another cloud alone
      assert.equal(wp.spec.pluginConfig.loadAware.remoteEndpointHeader, od.original_dst_lb_config.http_header_name);
    }
    assert.deepEqual(sortKeys(od), sortKeys(rigCluster(C.originalDstCluster)), `${k}: ORIGINAL_DST cluster differs from envoy/envoy.yaml`);
    assert.equal(od.original_dst_lb_config.http_header_name, C.remoteEndpointHeader);
  }
});

/** Port of the inference service, from the x-degraded route's outbound|PORT||host cluster. */
const inferencePort = (objs: Obj[]): number => {
  const clusters = find(objs, 'EnvoyFilter').flatMap((ef) => ef.spec.configPatches)
    .filter((cp: Obj) => cp.applyTo === 'HTTP_ROUTE').map((cp: Obj) => cp.patch.value.route.cluster as string);
  const m = clusters.map((c) => /^outbound\|(\d+)\|\|(.+)$/.exec(c)).find((x) => x && x[2] === C.inferenceAuthority);
  assert.ok(m, 'a route to the Kubernetes service cluster outbound|PORT||inference host');
  return Number(m[1]);
};

test('EnvoyFilter routes for the inference host: degraded and endpoint -> service cluster (override_host), remote endpoint -> ORIGINAL_DST, as in the rig', () => {
  const rig = readYaml('envoy/envoy.yaml');
  const rigVh = rig.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts
    .find((v: Obj) => v.domains.includes(C.inferenceAuthority));
  for (const [k, objs] of rendered) {
    const efs = find(objs, 'EnvoyFilter');
    if (!efs.length) continue;
    const port = inferencePort(objs);
    const vhost = `${C.inferenceAuthority}:${port}`;
    const serviceCluster = `outbound|${port}||${C.inferenceAuthority}`;
    const patches = efs.flatMap((ef) => ef.spec.configPatches).filter((cp: Obj) => cp.applyTo === 'HTTP_ROUTE');
    assert.equal(patches.length, 3, `${k}: three HTTP_ROUTE patches`);
    for (const cp of patches) {
      assert.equal(cp.match.context, 'SIDECAR_OUTBOUND');
      assert.equal(cp.patch.operation, 'INSERT_FIRST');
      // Istio names the outbound virtual host "<host>:<port>".
      assert.equal(cp.match.routeConfiguration.vhost.name, vhost);
      // No portNumber: with protocol sniffing the route configuration is named
      // "<host>:<port>", not "<port>", and a portNumber match would never apply.
      assert.equal(cp.match.routeConfiguration.portNumber, undefined, `${k}: no portNumber in the route match`);
      assert.equal(cp.match.routeConfiguration.vhost.route, undefined);
    }
    // Effective order after istiod applies the patches on top of its generated default route.
    const istioDefault = { name: 'default', match: { prefix: '/' }, route: { cluster: serviceCluster } };
    const routes = patchedVhostRoutes(efs, vhost, [istioDefault]);
    assert.deepEqual(routes.map((r) => r.name), ['switchyard-degraded-default', 'switchyard-remote-endpoint', 'switchyard-picked-endpoint', 'default'], `${k}: route order`);
    assert.deepEqual(routes.map((r) => r.route.cluster), [serviceCluster, C.originalDstCluster, serviceCluster, serviceCluster]);
    // Same matches, timeouts and retry policies as envoy/envoy.yaml, with the rig's clusters mapped to Istio's.
    const toIstio = (c: string): string => (c === C.inferenceDefaultCluster ? serviceCluster : c);
    assert.deepEqual(
      routes.map((r) => [r.match, r.route.cluster, r.route.timeout, r.route.retry_policy]).slice(0, 3),
      rigVh.routes.slice(0, 3).map((r: Obj) => [r.match, toIstio(r.route.cluster), r.route.timeout, r.route.retry_policy]),
      `${k}: inference routes differ from envoy/envoy.yaml`,
    );
    assert.ok(routes[2].route.retry_policy.num_retries >= 1, `${k}: the picked route retries (override_host walks the fallbacks)`);
    assert.equal(toIstio(rigVh.routes[3].route.cluster), istioDefault.route.cluster, 'rig catch-all = Istio default route');
    // Header names = the filter's (WasmPlugin) = the contract's.
    for (const wp of find(objs, 'WasmPlugin')) {
      const la = wp.spec.pluginConfig.loadAware;
      assert.equal(routes[0].match.headers[0].name, la.degradedHeader ?? 'x-degraded');
      assert.equal(routes[1].match.headers[0].name, la.remoteEndpointHeader);
      assert.equal(routes[2].match.headers[0].name, la.endpointHeader ?? 'x-switchyard-endpoint');
    }
    assert.equal(routes[0].match.headers[0].name, C.degradedHeader);
    assert.equal(routes[1].match.headers[0].name, C.remoteEndpointHeader);
    assert.equal(routes[2].match.headers[0].name, C.endpointHeader);
  }
});

test('istio/options/inference: the filter through ECDS with allow_on_headers_stop_iteration, the WasmPlugin\'s image and config plus request blocks, no WasmPlugin left', () => {
  const objs = rendered.get('istio/options/inference')!;
  assert.equal(find(objs, 'WasmPlugin').length, 0, 'no second, body-blind copy of the filter');
  const ref = one(rendered.get('istio/overlays/cloud-a')!, 'WasmPlugin');
  const ext = ecdsWasm(objs)!;
  assert.ok(ext, 'an EXTENSION_CONFIG patch');
  const cfg = ext.typed_config.config;
  assert.equal(cfg.allow_on_headers_stop_iteration, true);
  assert.equal(cfg.fail_open, false, 'fails closed like FAIL_CLOSE');
  assert.equal(cfg.root_id, ref.spec.pluginName);
  assert.equal(ext.name, `${ref.metadata.namespace}.${ref.metadata.name}`, 'named as istiod names the WasmPlugin filter');
  assert.equal(cfg.vm_config.code.remote.http_uri.uri, ref.spec.url, 'the same image as the WasmPlugin');
  assert.equal(cfg.vm_config.code.remote.sha256, ref.spec.sha256, 'the same pinned digest (re-pin both)');
  const filter = find(objs, 'EnvoyFilter').flatMap((ef) => ef.spec.configPatches).find((cp: Obj) => cp.applyTo === 'HTTP_FILTER');
  assert.equal(filter.patch.operation, 'INSERT_BEFORE');
  assert.equal(filter.match.listener.filterChain.filter.subFilter.name, 'envoy.filters.http.router');
  assert.equal(filter.patch.value.name, ext.name, 'the HTTP filter reads the ECDS config by name');
  assert.deepEqual(filter.patch.value.config_discovery.type_urls, [ext.typed_config['@type']]);
  const pc = JSON.parse(cfg.configuration.value);
  assert.deepEqual(checkPluginConfig(pc), []);
  const expected = structuredClone(ref.spec.pluginConfig);
  for (const s of expected.loadAware.services) s.request = { allowOnHeadersStopIteration: true };
  assert.deepEqual(sortKeys(pc), sortKeys(expected), 'the WasmPlugin\'s configuration with request blocks');
  for (const ef of find(objs, 'EnvoyFilter')) {
    if (!ef.spec.configPatches.some((cp: Obj) => cp.applyTo === 'EXTENSION_CONFIG')) continue;
    assert.deepEqual(ef.spec.workloadSelector.labels, ref.spec.selector.matchLabels, 'the same pods as the WasmPlugin');
  }
});

test('mTLS kept to the chosen instance: every cluster the filter\'s pick goes to is Istio\'s service cluster, its transport socket untouched; no PERMISSIVE port', () => {
  // Istio generates outbound|PORT||HOST with its mTLS transport socket (transport_socket_matches,
  // tlsMode istio); a cluster an EnvoyFilter ADDs has none. The pick (endpointHeader) must reach
  // the former, through the override_host policy MERGEd into it; only a remote pick (another
  // cloud's gateway, remoteEndpointHeader) may use the ORIGINAL_DST cluster.
  const MESH_FIELDS = ['transport_socket', 'transport_socket_matches', 'type', 'cluster_type', 'load_assignment', 'eds_cluster_config', 'tls_context', 'upstream_http_protocol_options'];
  let checked = 0;
  for (const [k, objs] of rendered) {
    const efs = find(objs, 'EnvoyFilter');
    for (const o of objs) {
      if (o.kind === 'PeerAuthentication') {
        const modes = [o.spec?.mtls?.mode, ...Object.values(o.spec?.portLevelMtls ?? {}).map((m: any) => m?.mode)];
        assert.ok(!modes.some((m) => m === 'PERMISSIVE' || m === 'DISABLE'), `${k}: ${o.metadata.name}: no PERMISSIVE/DISABLE port in the shipped manifests`);
      }
    }
    if (!efs.length) continue;
    const patches = efs.flatMap((ef) => ef.spec.configPatches);
    const added = new Set(patches.filter((cp: Obj) => cp.applyTo === 'CLUSTER' && cp.patch.operation === 'ADD').map((cp: Obj) => cp.patch.value.name));
    for (const pc of pluginConfigsOf(objs)) {
      const la = pc.loadAware;
      const endpointHeader = la.endpointHeader ?? 'x-switchyard-endpoint';
      for (const svc of la.services) {
        for (const a of svc.authorities.filter((x: string) => !x.startsWith('*.'))) {
          const vhNames = [...new Set(patches.map((cp: Obj) => cp.match?.routeConfiguration?.vhost?.name).filter((n: string | undefined) => n?.startsWith(`${a}:`)))] as string[];
          assert.equal(vhNames.length, 1, `${k}: ${a}: route patches for one virtual host`);
          const port = Number(vhNames[0].slice(a.length + 1));
          const serviceCluster = `outbound|${port}||${a}`;
          const routes = patchedVhostRoutes(efs, vhNames[0], [{ name: 'default', match: { prefix: '/' }, route: { cluster: serviceCluster } }]);
          const picked = routes.filter((r) => (r.match.headers ?? []).some((h: Obj) => h.name === endpointHeader && h.present_match === true));
          assert.ok(picked.length >= 1, `${k}: ${a}: a route for the filter's pick`);
          for (const r of picked) {
            const target = r.route.cluster as string;
            assert.ok(!added.has(target), `${k}: ${a}: the pick goes to ${target}, a cluster without Istio's transport socket`);
            assert.equal(target, serviceCluster, `${k}: ${a}: the pick goes to Istio's service cluster`);
            // the override_host policy on exactly that cluster, reading the filter's header
            const merges = patches.filter((cp: Obj) => cp.applyTo === 'CLUSTER' && cp.match.cluster?.service === a && cp.match.cluster?.portNumber === port);
            assert.equal(merges.length, 1, `${k}: ${a}: one patch of ${serviceCluster}`);
            const m = merges[0];
            assert.equal(m.patch.operation, 'MERGE', `${k}: ${serviceCluster} is merged into, never replaced or removed`);
            for (const f of MESH_FIELDS) assert.equal(m.patch.value[f], undefined, `${k}: the patch of ${serviceCluster} leaves ${f} to Istio`);
            const te = m.patch.value.load_balancing_policy.policies[0].typed_extension_config;
            assert.equal(te.name, 'envoy.load_balancing_policies.override_host');
            assert.deepEqual(te.typed_config.override_host_sources, [{ header: endpointHeader }], `${k}: override_host reads the filter's header`);
            assert.match(te.typed_config.fallback_policy.policies[0].typed_extension_config.typed_config['@type'], /least_request\.v3\.LeastRequest$/);
            checked++;
          }
          // every route to a cluster without Istio's socket requires the remote header only
          for (const r of routes.filter((x) => added.has(x.route.cluster))) {
            assert.deepEqual(r.match.headers.map((h: Obj) => h.name), [la.remoteEndpointHeader], `${k}: ${r.name}: only remote picks leave the mesh's mTLS`);
          }
        }
      }
    }
  }
  assert.ok(checked >= 5, `not vacuous: ${checked} pick routes checked (the request-aware option's included)`);
  // nor in a file under istio/ that a kustomization does not render (snippets)
  for (const f of ['istio/snippets/agent-sidecar.patch.yaml']) assert.doesNotMatch(readText(f).replace(/#.*$/gm, ''), /PERMISSIVE/);
});

test('wherever allIneligible is forward-degraded (Istio), the degraded marker reaches the service cluster first', () => {
  for (const [k, objs] of rendered) {
    for (const wp of find(objs, 'WasmPlugin')) {
      const la = wp.spec.pluginConfig.loadAware;
      const forwarding = (la?.services ?? []).filter((s: Obj) => (s.allIneligible ?? 'forward-degraded') === 'forward-degraded');
      for (const svc of forwarding) {
        for (const a of svc.authorities.filter((x: string) => !x.startsWith('*.'))) {
          const efs = find(objs, 'EnvoyFilter');
          const vhNames = efs.flatMap((ef) => ef.spec.configPatches).map((cp: Obj) => cp.match?.routeConfiguration?.vhost?.name)
            .filter((n: string | undefined) => n?.startsWith(`${a}:`));
          assert.ok(vhNames.length > 0, `${k}: no route patches for ${a}`);
          const port = Number(vhNames[0].slice(a.length + 1));
          const routes = patchedVhostRoutes(efs, `${a}:${port}`, [{ name: 'default', match: { prefix: '/' }, route: { cluster: `outbound|${port}||${a}` } }]);
          const iDeg = routes.findIndex((r) => (r.match.headers ?? []).some((h: Obj) => h.name === (la.degradedHeader ?? 'x-degraded') && h.string_match?.exact === 'true'));
          const iOd = routes.findIndex((r) => r.route.cluster === C.originalDstCluster);
          assert.ok(iDeg >= 0 && iDeg < iOd, `${k}: ${a}: degraded route before the ORIGINAL_DST route`);
          assert.equal(routes[iDeg].route.cluster, `outbound|${port}||${a}`, `${k}: ${a}: degraded requests go to the Kubernetes service`);
        }
      }
    }
  }
});

test('inference DestinationRule: Switchyard clients only, LEAST_REQUEST like the rig\'s override_host fallback', () => {
  const rig = readYaml('envoy/envoy.yaml');
  const rigInf = rig.static_resources.clusters.find((c: Obj) => c.name === C.inferenceDefaultCluster);
  const fallbackType = rigInf.load_balancing_policy.policies[0].typed_extension_config.typed_config.fallback_policy.policies[0].typed_extension_config.typed_config['@type'];
  assert.match(fallbackType, /least_request\.v3\.LeastRequest$/);
  for (const k of ['istio/base', 'istio/overlays/cloud-a', 'istio/overlays/cloud-b']) {
    const objs = rendered.get(k)!;
    const dr = one(objs, 'DestinationRule', 'inference-switchyard-clients');
    assert.equal(dr.spec.host, C.inferenceAuthority);
    const wp = one(objs, 'WasmPlugin');
    assert.deepEqual(dr.spec.workloadSelector.matchLabels, wp.spec.selector.matchLabels, 'same pods as the filter');
    assert.equal(dr.spec.trafficPolicy.loadBalancer.simple, 'LEAST_REQUEST');
    assert.equal(dr.spec.subsets, undefined);
  }
});

test('VirtualService mirrors envoy.yaml and is fail-safe: normal -> 50/50, anything else -> local 100', () => {
  const rig = readYaml('envoy/envoy.yaml');
  const vh = rig.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts.find((v: Obj) =>
    v.domains.includes(C.demoAuthority),
  );
  const rigRules = vh.routes.slice(0, 3);
  const rigSplit = vh.routes[3];
  const rigLocal = vh.routes[4];
  // The rig's cluster of each rule target and the Istio subset's network label must agree.
  const rigNetwork: Record<string, string> = { cloud_a: 'network-cloud-a', cloud_a_canary: 'network-cloud-a', cloud_b: 'network-cloud-b' };
  for (const k of ['istio/base', 'istio/overlays/cloud-a', 'istio/overlays/cloud-b']) {
    const objs = rendered.get(k)!;
    const vs = one(objs, 'VirtualService');
    const dr = one(objs, 'DestinationRule', 'payment-service-subsets');
    assert.deepEqual(vs.spec.hosts, [C.demoAuthority]);
    assert.equal(dr.spec.host, C.demoAuthority);
    assert.equal(vs.spec.http.length, 5, `${k}: the three rule targets, the split and the local default`);
    const [split, degraded] = vs.spec.http.slice(3);
    // Rule targets: the same header and exact values as the rig, in the same order, each to a
    // subset on the rig cluster's cloud; the canary subset is distinct from the stable one.
    const subsetsOf = new Map(dr.spec.subsets.map((s: Obj) => [s.name, s.labels]));
    vs.spec.http.slice(0, 3).forEach((r: Obj, i: number) => {
      const rigH = rigRules[i].match.headers[0];
      assert.deepEqual(r.match, [{ headers: { [rigH.name]: { exact: rigH.string_match.exact } } }], `${k}: rule route ${i}`);
      assert.equal(r.route.length, 1);
      assert.equal(r.route[0].destination.host, C.demoAuthority);
      const labels = subsetsOf.get(r.route[0].destination.subset) as Obj;
      assert.ok(labels, `${k}: subset ${r.route[0].destination.subset}`);
      assert.equal(labels['topology.istio.io/network'], rigNetwork[rigRules[i].route.cluster], `${k}: ${rigH.string_match.exact}`);
    });
    assert.notDeepEqual(subsetsOf.get('dc1'), subsetsOf.get('dc1-canary'));
    // Same header and value as the rig's first route: only an explicit "normal" splits.
    const hdr = rigSplit.match.headers[0];
    assert.equal(hdr.name, C.statusHeader);
    assert.deepEqual(split.match, [{ headers: { [hdr.name]: { exact: hdr.string_match.exact } } }]);
    assert.equal(hdr.string_match.exact, 'normal');
    assert.equal(degraded.match, undefined, 'the local route is the default route (absent / unknown / degraded)');
    assert.deepEqual(degraded.route.map((r: Obj) => [r.destination.subset, r.weight]), [['local-cloud', 100]]);
    const rigWeights = rigSplit.route.weighted_clusters.clusters.map((c: Obj) => c.weight);
    assert.deepEqual(split.route.map((r: Obj) => [r.destination.subset, r.weight]), [
      ['local-cloud', rigWeights[0]],
      ['remote-cloud', rigWeights[1]],
    ]);
    assert.equal(rigSplit.route.weighted_clusters.clusters[0].name, rigLocal.route.cluster, 'rig: first split cluster is the local one');
    assert.deepEqual(rigLocal.match, { prefix: '/' }, 'rig: the local route is the default route');
    for (const r of [...degraded.route, ...split.route]) assert.equal(r.destination.host, C.demoAuthority);
    // Every subset used exists, keyed on the network label, local != remote.
    const subsets = new Map(dr.spec.subsets.map((s: Obj) => [s.name, s.labels]));
    for (const r of [...degraded.route, ...split.route]) assert.ok(subsets.has(r.destination.subset), `${k}: subset ${r.destination.subset}`);
    const net = (n: string): string => (subsets.get(n) as Obj)['topology.istio.io/network'];
    assert.match(net('local-cloud'), /^network-cloud-[ab]$/);
    assert.match(net('remote-cloud'), /^network-cloud-[ab]$/);
    assert.notEqual(net('local-cloud'), net('remote-cloud'));
  }
});

test('per cloud: local subset, watched peer and probed peer agree', () => {
  for (const [k, local, peer] of [
    ['istio/overlays/cloud-a', 'network-cloud-a', 'cloud-b'],
    ['istio/overlays/cloud-b', 'network-cloud-b', 'cloud-a'],
    ['istio/base', 'network-cloud-a', 'cloud-b'],
  ] as const) {
    const objs = rendered.get(k)!;
    const dr = one(objs, 'DestinationRule', 'payment-service-subsets');
    assert.equal(dr.spec.subsets.find((s: Obj) => s.name === 'local-cloud').labels['topology.istio.io/network'], local, k);
    const wp = one(objs, 'WasmPlugin');
    const peers = wp.spec.pluginConfig.link.services.map((s: Obj) => s.peer);
    assert.deepEqual([...new Set(peers)], [peer], `${k}: filter peer`);
    const cm = one(objs, 'ConfigMap', 'switchyard-agent');
    const agentCfg = parseYamlDocs(cm.data['agent.yaml'], `${k} ConfigMap`)[0];
    assert.deepEqual(checkAgentConfig(agentCfg), [], `${k}: agent config`);
    assert.deepEqual(agentCfg.link.peers.map((x: Obj) => x.name), [peer], `${k}: agent peers`);
    assert.ok(!agentCfg.link.peers[0].probe.url.includes(local.replace('network-', '')), `${k}: the agent must probe the other cloud`);
    assert.equal(agentCfg.listen.port, C.ports.agent);
    assert.equal(agentCfg.listen.host, '127.0.0.1', `${k}: sidecar agent must stay on loopback`);
    checkInferenceWiring(k, wp, agentCfg, objs);
  }
  const ds = rendered.get('istio/options/agent-daemonset')!;
  const cm = one(ds, 'ConfigMap', 'switchyard-agent', 'switchyard-system');
  const nodeCfg = parseYamlDocs(cm.data['agent.yaml'], 'daemonset ConfigMap')[0];
  assert.deepEqual(checkAgentConfig(nodeCfg), []);
  assert.equal(nodeCfg.listen.port, C.ports.agent);
  checkInferenceWiring('istio/options/agent-daemonset', one(ds, 'WasmPlugin'), nodeCfg, ds);
});

/**
 * The agent scrapes the service the WasmPlugin chooses among (same name), only local
 * instances (pod IPs of the other network are not routable for ORIGINAL_DST), on the port
 * of the inference Service that the routes use.
 */
function checkInferenceWiring(k: string, wp: Obj, agentCfg: Obj, objs: Obj[]): void {
  const la = wp.spec.pluginConfig.loadAware;
  assert.deepEqual(la.services.map((s: Obj) => [s.authorities, s.service]), [[[C.inferenceAuthority], C.fleet.service]], `${k}: load-aware service`);
  const services: Obj[] = agentCfg.inference?.services ?? [];
  for (const s of la.services) assert.ok(services.some((x) => x.name === s.service), `${k}: the agent scrapes no "${s.service}"`);
  for (const s of services) {
    assert.equal(s.peer ?? '', '', `${k}: ${s.name}: only local instances on Istio`);
    assert.equal(s.kind, 'vllm');
    assert.equal(s.instances.dns?.port, inferencePort(objs), `${k}: ${s.name}: scraped port = the port ORIGINAL_DST connects to = the service port of the routes`);
    assert.match(s.instances.dns?.name ?? '', new RegExp(`\\.${C.inferenceAuthority.split('.')[1]}\\.svc\\.cluster\\.local$`), `${k}: a Service in the inference namespace`);
  }
}

test('DaemonSet option: non-root, probes on /healthz, config mounted, no API token', () => {
  const objs = rendered.get('istio/options/agent-daemonset')!;
  const d = one(objs, 'DaemonSet');
  const pod = d.spec.template.spec;
  assert.equal(pod.hostNetwork ?? false, false);
  assert.equal(pod.automountServiceAccountToken, false);
  assert.equal(pod.securityContext.runAsNonRoot, true);
  const c = pod.containers[0];
  assert.equal(c.livenessProbe.httpGet.path, '/healthz');
  assert.equal(c.readinessProbe.httpGet.path, '/healthz');
  assert.deepEqual(c.args, ['build/agent.js', '--config', '/etc/switchyard/agent.yaml']);
  assert.equal(c.volumeMounts[0].mountPath, '/etc/switchyard');
  assert.equal(find(objs, 'Role').length + find(objs, 'ClusterRole').length, 0, 'the agent needs no RBAC');
  const sa = one(objs, 'ServiceAccount', pod.serviceAccountName, d.metadata.namespace);
  assert.equal(sa.automountServiceAccountToken, false);
  const np = one(objs, 'NetworkPolicy');
  assert.equal(np.spec.ingress[0].ports[0].port, C.ports.agent);
});

test('sidecar snippet: merged into a Deployment it is valid and wired to the base', async () => {
  const patch = readYaml('istio/snippets/agent-sidecar.patch.yaml');
  // A minimal client Deployment, then the strategic merge for the fields the
  // snippet sets (maps merge; containers/volumes merge by name).
  const dep: Obj = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'payment-client', namespace: 'prod' },
    spec: {
      selector: { matchLabels: { app: 'payment-client' } },
      template: {
        metadata: { labels: { app: 'payment-client' } },
        spec: { containers: [{ name: 'app', image: 'registry.switchyard.invalid/payment-client:1' }] },
      },
    },
  };
  const pt = patch.spec.template;
  const t = dep.spec.template;
  t.metadata.labels = { ...t.metadata.labels, ...pt.metadata.labels };
  t.metadata.annotations = { ...(t.metadata.annotations ?? {}), ...pt.metadata.annotations };
  const byName = (a: Obj[] = [], b: Obj[] = []): Obj[] => [...a.filter((x) => !b.some((y) => y.name === x.name)), ...b];
  t.spec.volumes = byName(t.spec.volumes, pt.spec.volumes);
  t.spec.containers = byName(t.spec.containers, pt.spec.containers);
  const allowedTop = ['metadata', 'spec'];
  assert.deepEqual(Object.keys(patch.spec), ['template']);
  assert.deepEqual(Object.keys(pt).sort(), allowedTop);
  assert.deepEqual(Object.keys(pt.spec).sort(), ['containers', 'volumes'], 'the test merge handles only these fields');

  await validateWithModel(dep);
  assert.deepEqual(unknownFieldProblems([dep]), []);

  const agent = t.spec.containers.find((c: Obj) => c.name === 'switchyard-agent');
  const base = rendered.get('istio/base')!;
  const cm = one(base, 'ConfigMap', 'switchyard-agent');
  const vol = t.spec.volumes.find((v: Obj) => v.name === agent.volumeMounts[0].name);
  assert.equal(vol.configMap.name, cm.metadata.name);
  const configPath = agent.args[agent.args.indexOf('--config') + 1];
  assert.equal(configPath, `${agent.volumeMounts[0].mountPath}/${Object.keys(cm.data)[0]}`);
  // Selected by the WasmPlugin and the EnvoyFilters.
  const wp = one(base, 'WasmPlugin');
  for (const [key, v] of Object.entries(wp.spec.selector.matchLabels)) assert.equal(t.metadata.labels[key], v);
  // Non-root, locked down, probes hit /healthz on the agent port.
  const sc = agent.securityContext;
  assert.equal(sc.runAsNonRoot, true);
  assert.ok(sc.runAsUser > 0);
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.equal(sc.readOnlyRootFilesystem, true);
  assert.deepEqual(sc.capabilities.drop, ['ALL']);
  for (const probe of [agent.livenessProbe, agent.startupProbe]) {
    assert.ok(probe.exec.command.join(' ').includes(`http://127.0.0.1:${C.ports.agent}/healthz`));
  }
  assert.ok(agent.resources.requests.cpu && agent.resources.requests.memory && agent.resources.limits.memory);
  // Stats: the annotation keeps the filter's wasmcustom metrics.
  const pc = parseYamlDocs(t.metadata.annotations['proxy.istio.io/config'], 'proxy.istio.io/config')[0];
  assert.ok(pc.proxyStatsMatcher.inclusionPrefixes.some((x: string) => 'wasmcustom.switchyard.link.decision.normal'.startsWith(x)));
  // The probe port bypasses the sidecar, and it is the port the agent probes.
  const agentCfg = parseYamlDocs(cm.data['agent.yaml'], 'cm')[0];
  const probePort = new URL(agentCfg.link.peers[0].probe.url).port;
  assert.ok(t.metadata.annotations['traffic.sidecar.istio.io/excludeOutboundPorts'].split(',').includes(probePort));
});

test('mesh-wide stats option keeps wasmcustom.switchyard metrics', () => {
  const io = one(rendered.get('istio/options/mesh-stats')!, 'IstioOperator');
  // The IstioOperator model has no typed spec (the operator CRD preserves unknown
  // fields), so check the shape here: field names of istio.mesh.v1alpha1.ProxyConfig
  // proxy_stats_matcher (inclusion_prefixes / _suffixes / _regexps) in JSON form.
  assert.deepEqual(Object.keys(io.spec), ['meshConfig']);
  assert.deepEqual(Object.keys(io.spec.meshConfig), ['defaultConfig']);
  assert.deepEqual(Object.keys(io.spec.meshConfig.defaultConfig), ['proxyStatsMatcher']);
  for (const key of Object.keys(io.spec.meshConfig.defaultConfig.proxyStatsMatcher)) {
    assert.ok(['inclusionPrefixes', 'inclusionSuffixes', 'inclusionRegexps'].includes(key), key);
  }
  const prefixes: string[] = io.spec.meshConfig.defaultConfig.proxyStatsMatcher.inclusionPrefixes;
  for (const stat of ['wasmcustom.switchyard.link.decision.degraded', 'wasmcustom.switchyard.writer.active']) {
    assert.ok(prefixes.some((x) => stat.startsWith(x)), stat);
  }
});

// ------------------------------------------------------------ istio/options/mesh (issue 22)

const MESH = 'istio/options/mesh';
const meshObjs = (): Obj[] => rendered.get(MESH)!;
/** labels ⊆ podLabels */
const selects = (labels: Obj | undefined, podLabels: Obj): boolean =>
  !!labels && Object.keys(labels).length > 0 && Object.entries(labels).every(([k, v]) => podLabels[k] === v);
/** The agent config a workload really reads: --config path -> volumeMount -> ConfigMap key. */
function mountedAgentConfig(objs: Obj[], workload: Obj): Obj {
  const pod = workload.spec.template.spec;
  const c = pod.containers[0];
  const path: string = c.args[c.args.indexOf('--config') + 1];
  const dir = path.slice(0, path.lastIndexOf('/'));
  const mount = c.volumeMounts.find((m: Obj) => m.mountPath === dir);
  assert.ok(mount, `${workload.metadata.name}: nothing mounted at ${dir}`);
  const vol = pod.volumes.find((v: Obj) => v.name === mount.name);
  const cm = one(objs, 'ConfigMap', vol.configMap.name, workload.metadata.namespace);
  const text = cm.data[path.slice(dir.length + 1)];
  assert.ok(text, `${workload.metadata.name}: ConfigMap ${cm.metadata.name} has no ${path}`);
  return parseYamlDocs(text, `${MESH} ${cm.metadata.name}`)[0];
}
/** The Secret (name, key) a workload's file path comes from, or undefined. */
function secretBehind(workload: Obj, file: string): { name: string; key: string } | undefined {
  const pod = workload.spec.template.spec;
  for (const m of pod.containers[0].volumeMounts ?? []) {
    if (!file.startsWith(`${m.mountPath}/`)) continue;
    const vol = pod.volumes.find((v: Obj) => v.name === m.name);
    if (!vol?.secret) return undefined;
    const item = (vol.secret.items ?? []).find((i: Obj) => i.path === file.slice(m.mountPath.length + 1));
    return item ? { name: vol.secret.secretName, key: item.key } : undefined;
  }
  return undefined;
}
const natsConf = (objs: Obj[]): string => {
  const d = one(objs, 'Deployment', 'switchyard-nats');
  const c = d.spec.template.spec.containers[0];
  const path: string = c.args[c.args.indexOf('--config') + 1];
  const dir = path.slice(0, path.lastIndexOf('/'));
  const mount = c.volumeMounts.find((m: Obj) => m.mountPath === dir);
  const vol = d.spec.template.spec.volumes.find((v: Obj) => v.name === mount.name);
  const text = one(objs, 'ConfigMap', vol.configMap.name, d.metadata.namespace).data[path.slice(dir.length + 1)];
  assert.ok(text, 'the NATS Deployment mounts its nats.conf');
  return text;
};
/** A top-level `key: value` of a NATS config (comments dropped). */
const natsOption = (conf: string, key: string): string | undefined =>
  new RegExp(`^\\s*${key}\\s*[:=]\\s*("?)([^"\\s]+)\\1\\s*$`, 'm').exec(conf.replace(/#.*$/gm, ''))?.[2];
// eslint-disable-next-line @typescript-eslint/no-require-imports
const meshDefaults = (require('../../agent/src/mesh/schema') as { meshSchema: Obj }).meshSchema.properties;

test('mesh option: two collectors on two nodes, a PDB, a valid collector config with etcd', () => {
  const objs = meshObjs();
  const dep = one(objs, 'Deployment', 'switchyard-collector');
  assert.equal(dep.spec.replicas, 2, 'two collectors (availability: one leads, one stands by)');
  const podLabels = dep.spec.template.metadata.labels;
  assert.ok(selects(dep.spec.selector.matchLabels, podLabels));
  const pod = dep.spec.template.spec;
  const anti: Obj[] = pod.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
  assert.ok(anti.some((t) => t.topologyKey === 'kubernetes.io/hostname' && selects(t.labelSelector?.matchLabels, podLabels)),
    'required anti-affinity on the node, selecting the collectors themselves');
  // with a required anti-affinity a surge pod needs a third node: roll one at a time instead
  assert.equal(dep.spec.strategy.rollingUpdate.maxSurge, 0);
  const pdb = one(objs, 'PodDisruptionBudget', undefined, dep.metadata.namespace);
  assert.equal(pdb.spec.minAvailable, 1);
  assert.ok(selects(pdb.spec.selector.matchLabels, podLabels), 'the PDB covers the collectors');
  const ds = one(objs, 'DaemonSet', 'switchyard-agent');
  assert.ok(!selects(pdb.spec.selector.matchLabels, ds.spec.template.metadata.labels), 'the PDB does not cover the node agents');
  // the same agent build, locked down like the node agents
  assert.equal(pod.containers[0].image, ds.spec.template.spec.containers[0].image);
  assert.equal(pod.automountServiceAccountToken, false);
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.equal(pod.containers[0].readinessProbe.httpGet.path, '/healthz');
  assert.ok(pod.containers[0].resources.requests.memory && pod.containers[0].resources.limits.memory);
  const cfg = mountedAgentConfig(objs, dep);
  assert.deepEqual(checkAgentConfig(cfg), [], 'collector config (agent schema + loader)');
  assert.equal(cfg.mesh.mode, 'collector');
  assert.ok(cfg.mesh.etcd.endpoints.length >= 1);
  for (const e of cfg.mesh.etcd.endpoints) assert.match(e, /\.svc\.cluster\.local:\d+$/, 'an in-cluster etcd');
  assert.equal(cfg.mesh.etcd.leaseTtlS ?? meshDefaults.etcd.properties.leaseTtlS.default, 1, 'the 1 s lease docs/mesh.md measures');
  assert.equal(cfg.listen.host, '0.0.0.0', 'httpGet probes reach the pod IP');
  assert.equal(cfg.listen.port, pod.containers[0].ports[0].containerPort);
});

test('mesh option: the NATS Service, the server config and every agent agree on port and URL', () => {
  const objs = meshObjs();
  const svc = one(objs, 'Service', 'switchyard-nats');
  const nats = one(objs, 'Deployment', 'switchyard-nats');
  const c = nats.spec.template.spec.containers[0];
  assert.match(c.image, /^nats:\d+\.\d+\.\d+$/, 'the official nats image, pinned by tag');
  assert.ok(selects(svc.spec.selector, nats.spec.template.metadata.labels), 'the Service selects the NATS pod');
  assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory);
  const conf = natsConf(objs);
  const port = (name: string): { port: number; target: number } => {
    const sp = svc.spec.ports.find((x: Obj) => x.name === name);
    assert.ok(sp, `Service port ${name}`);
    const cp = c.ports.find((x: Obj) => x.name === sp.targetPort || x.containerPort === sp.targetPort);
    assert.ok(cp, `${name}: targetPort ${sp.targetPort} is a container port`);
    return { port: sp.port, target: cp.containerPort };
  };
  const client = port('client');
  const monitor = port('monitor');
  assert.equal(client.port, 4222);
  assert.equal(monitor.port, 8222);
  assert.equal(Number(natsOption(conf, 'port')), client.target, 'nats.conf port = the container port the Service targets');
  assert.equal(Number(natsOption(conf, 'http_port')), monitor.target, 'nats.conf http_port = the monitoring port');
  assert.equal(c.readinessProbe.httpGet.port, c.ports.find((x: Obj) => x.containerPort === monitor.target).name);
  const np = one(objs, 'NetworkPolicy', 'switchyard-nats');
  assert.ok(selects(np.spec.podSelector.matchLabels, nats.spec.template.metadata.labels));
  assert.ok(np.spec.ingress[0].ports.some((x: Obj) => x.port === client.target));
  for (const name of ['switchyard-collector', 'switchyard-agent']) {
    const w = [...find(objs, 'Deployment', name), ...find(objs, 'DaemonSet', name)];
    assert.equal(w.length, 1, name);
    const cfg = mountedAgentConfig(objs, w[0]);
    assert.ok(cfg.mesh?.nats?.servers?.length, `${name}: mesh.nats.servers`);
    for (const s of cfg.mesh.nats.servers) {
      const u = new URL(s);
      assert.equal(u.hostname, `${svc.metadata.name}.${svc.metadata.namespace}.svc.cluster.local`, `${name}: ${s} names the NATS Service`);
      assert.equal(Number(u.port), client.port, `${name}: ${s} uses the Service's client port`);
      assert.equal(u.protocol, 'nats:');
    }
    assert.ok(np.spec.ingress[0].from.some((f: Obj) => selects(f.podSelector?.matchLabels, w[0].spec.template.metadata.labels)), `${name} may reach NATS`);
  }
});

test('mesh option: the node agents subscribe to the pools the collectors publish', () => {
  const objs = meshObjs();
  const ds = one(objs, 'DaemonSet', 'switchyard-agent');
  const sub = mountedAgentConfig(objs, ds);
  assert.deepEqual(checkAgentConfig(sub), [], 'subscriber config (agent schema + loader)');
  assert.equal(sub.mesh.mode, 'subscriber');
  assert.equal(sub.mesh.etcd, undefined, 'subscribers need no etcd access');
  const col = mountedAgentConfig(objs, one(objs, 'Deployment', 'switchyard-collector'));
  const prefix = (cfg: Obj): string => cfg.mesh.nats.subjectPrefix ?? meshDefaults.nats.properties.subjectPrefix.default;
  assert.equal(prefix(sub), prefix(col), 'same subjects prefix');
  // a pool is (peer, service): subscribers wait for exactly the pools the collectors elect and publish
  const pools = (cfg: Obj): string[] => cfg.inference.services.map((s: Obj) => `${s.peer ?? ''}/${s.name}`).sort();
  assert.deepEqual(pools(sub), pools(col));
  assert.deepEqual(sub.inference.services, col.inference.services, 'the fallback scrapes what the collectors scrape');
  // apart from `mesh`, the node agents keep the DaemonSet option's config (the filters, the link)
  const plain = mountedAgentConfig(rendered.get('istio/options/agent-daemonset')!, one(rendered.get('istio/options/agent-daemonset')!, 'DaemonSet'));
  const { mesh: _mesh, ...rest } = sub;
  void _mesh;
  assert.deepEqual(rest, plain);
  checkInferenceWiring(MESH, one(objs, 'WasmPlugin'), sub, objs);
});

test('mesh option: no secret value committed; NATS and every agent take the token from one Secret', () => {
  const objs = meshObjs();
  assert.deepEqual(find(objs, 'Secret').map(resKey), [], 'no Secret is shipped (created by the operator, docs/install.md)');
  // every credential-looking setting of a shipped config is a reference, not a value
  for (const cm of find(objs, 'ConfigMap')) {
    for (const [key, text] of Object.entries(cm.data as Obj)) {
      for (const m of String(text).replace(/#.*$/gm, '').matchAll(/\b(token|password|pass|nkey|seed)\s*[:=]\s*("?)([^\s"]+)/gi)) {
        assert.match(m[3], /^\$[A-Z_][A-Z0-9_]*$/, `${cm.metadata.name} ${key}: ${m[1]} must be an environment reference, not a value`);
      }
    }
  }
  const conf = natsConf(objs);
  assert.match(conf.replace(/#.*$/gm, ''), /authorization\s*\{[^}]*token\s*:/, 'NATS requires a token');
  const v = /token\s*:\s*\$([A-Z_][A-Z0-9_]*)/.exec(conf)![1];
  const nats = one(objs, 'Deployment', 'switchyard-nats');
  const env = nats.spec.template.spec.containers[0].env.find((e: Obj) => e.name === v);
  assert.ok(env, `the NATS container sets $${v}`);
  assert.equal(env.value, undefined, `$${v} has no literal value`);
  const ref = env.valueFrom.secretKeyRef;
  for (const name of ['switchyard-collector', 'switchyard-agent']) {
    const w = [...find(objs, 'Deployment', name), ...find(objs, 'DaemonSet', name)][0];
    const cfg = mountedAgentConfig(objs, w);
    assert.ok(cfg.mesh.nats.tokenFile, `${name}: mesh.nats.tokenFile`);
    assert.deepEqual(secretBehind(w, cfg.mesh.nats.tokenFile), { name: ref.name, key: ref.key }, `${name}: the token file is the NATS Secret's key`);
  }
});

test('mesh option: the shipped nats.conf runs in nats-server and refuses clients without the token', async (t) => {
  const { spawn } = await import('node:child_process');
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { createServer } = await import('node:net');
  const { connect } = await import('nats');
  const bin = process.env.NATS_BIN ?? '/usr/sbin/nats-server';
  const free = (): Promise<number> => new Promise((r) => { const s = createServer().listen(0, '127.0.0.1', () => { const a = s.address() as { port: number }; s.close(() => r(a.port)); }); });
  const dir = mkdtempSync(join(tmpdir(), 'swy-natsconf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'nats.conf'), natsConf(meshObjs()));
  const [port, http] = [await free(), await free()];
  const token = `t${Math.random().toString(36).slice(2)}`;
  // the shipped file, with the ports moved to free loopback ones (flags override the file)
  const proc = spawn(bin, ['-c', join(dir, 'nats.conf'), '-a', '127.0.0.1', '-p', String(port), '-m', String(http)], { env: { ...process.env, NATS_TOKEN: token }, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr!.on('data', (c) => (log += c));
  t.after(() => { proc.kill('SIGKILL'); });
  const end = Date.now() + 10_000;
  for (;;) {
    assert.equal(proc.exitCode, null, `nats-server rejected the shipped config: ${log}`);
    const ok = await fetch(`http://127.0.0.1:${http}/healthz`).then((r) => r.ok, () => false);
    if (ok) break; // the readiness/liveness probe path answers
    assert.ok(Date.now() < end, `nats-server not healthy within 10 s: ${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  for (const bad of [undefined, 'wrong']) {
    await assert.rejects(connect({ servers: `127.0.0.1:${port}`, token: bad, reconnect: false }), /AUTHORIZATION_VIOLATION|Authorization/i, `token ${bad} accepted`);
  }
  const nc = await connect({ servers: `127.0.0.1:${port}`, token, reconnect: false });
  await nc.close();
});
