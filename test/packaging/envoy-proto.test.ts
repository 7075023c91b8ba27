// Envoy configs validated against Envoy's own API (issue 11): scripts/envoy-proto.ts checks a
// document as Envoy would load it, against the data-plane-api protos bundled by
// @grpc/grpc-js-xds. Every shipped Envoy config must pass with deprecated fields refused; each
// class of defect is caught on a purpose-made broken input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ENVOY_FILTER_TYPES, formatFindings, validateBootstrap, validateEnvoyFilter, validateEnvoyMessage,
  type FindingClass, type ValidationResult,
} from '../../scripts/envoy-proto';
import { KUSTOMIZATIONS, type Obj, readYaml, readYamlDocs, renderKustomization } from './helpers';

const STRICT = { deprecated: 'error' as const };
const CLUSTER = 'envoy.config.cluster.v3.Cluster';
const ROUTE = 'envoy.config.route.v3.Route';

function expectFinding(r: ValidationResult, cls: FindingClass, path: string, message: RegExp): void {
  const hit = [...r.errors, ...r.warnings].find((f) => f.class === cls && f.path === path && message.test(f.message));
  assert.ok(hit, `expected a ${cls} finding at ${path} matching ${message}; got:\n${formatFindings(r) || '(none)'}`);
}

const goodCluster = (): Obj => ({
  name: 'c', type: 'STATIC', connect_timeout: '1s', lb_policy: 'ROUND_ROBIN',
  load_assignment: { cluster_name: 'c', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: 80 } } } }] }] },
});
const goodRoute = (): Obj => ({ match: { prefix: '/' }, route: { cluster: 'c', timeout: '5s' } });
const bootstrapWithFilter = (httpFilter: Obj): Obj => {
  const doc = structuredClone(readYaml('envoy/envoy.yaml'));
  doc.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters.unshift(httpFilter);
  return doc;
};
const HF = 'static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0]';

// --- shipped configs ---------------------------------------------------------------------------

test('envoy/envoy.yaml and the host fixture bootstrap are valid Envoy bootstraps (no deprecated fields)', () => {
  for (const f of ['envoy/envoy.yaml', 'envoy/envoy-inference.yaml', 'test/fixtures/host/envoy.yaml']) {
    const r = validateBootstrap(readYaml(f), STRICT);
    assert.ok(r.ok && !r.warnings.length, `${f}:\n${formatFindings(r)}`);
  }
});

test('every EnvoyFilter patch in istio/ (sources and every rendered kustomization) is valid as its applyTo type', () => {
  const filters: [string, Obj][] = [];
  for (const f of ['istio/base/envoyfilter-agent-cluster.yaml', 'istio/base/envoyfilter-original-dst.yaml', 'istio/base/envoyfilter-override-host.yaml']) {
    for (const d of readYamlDocs(f)) filters.push([f, d]);
  }
  for (const k of KUSTOMIZATIONS) {
    for (const o of renderKustomization(k)) if (o.kind === 'EnvoyFilter') filters.push([`${k}: ${o.metadata.name}`, o]);
  }
  let patches = 0;
  const applyTos = new Set<string>();
  for (const [where, ef] of filters) {
    const r = validateEnvoyFilter(ef, STRICT);
    assert.ok(r.ok && !r.warnings.length, `${where}:\n${formatFindings(r)}`);
    for (const p of ef.spec.configPatches) {
      patches++;
      applyTos.add(p.applyTo);
    }
  }
  // Not vacuous: the agent cluster (base, overlays, DaemonSet variant), the ORIGINAL_DST cluster and routes.
  assert.ok(filters.some(([w]) => w.startsWith('istio/options/agent-daemonset')), 'the DaemonSet variant is checked');
  assert.ok(patches >= 12, `patches checked: ${patches}`);
  assert.deepEqual([...applyTos].sort(), ['CLUSTER', 'EXTENSION_CONFIG', 'HTTP_FILTER', 'HTTP_ROUTE']);
});

// --- one test per class of defect ---------------------------------------------------------------

test('class unknown field: a misspelt field is refused with its path (also inside typed_config)', () => {
  const c = goodCluster();
  c.conect_timeout = c.connect_timeout;
  expectFinding(validateEnvoyMessage(CLUSTER, c), 'unknown-field', 'conect_timeout', /unknown field "conect_timeout" in envoy\.config\.cluster\.v3\.Cluster/);
  const r = validateBootstrap(bootstrapWithFilter({ name: 'x', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router', suppress_envoy_header: true } }));
  expectFinding(r, 'unknown-field', `${HF}.typed_config.suppress_envoy_header`, /unknown field/);
  // The JSON names (lowerCamelCase) are accepted like the proto names, as Envoy's JSON parser does.
  const camel = goodCluster();
  camel.connectTimeout = camel.connect_timeout;
  delete camel.connect_timeout;
  assert.ok(validateEnvoyMessage(CLUSTER, camel).ok);
  camel.connect_timeout = '2s';
  expectFinding(validateEnvoyMessage(CLUSTER, camel), 'json', 'connect_timeout', /set twice/);
});

test('class enum: an unknown enum name is refused; numbers must be defined values (PGV defined_only)', () => {
  const c = goodCluster();
  c.lb_policy = 'ROUND_ROBBIN';
  expectFinding(validateEnvoyMessage(CLUSTER, c), 'enum', 'lb_policy', /unknown value "ROUND_ROBBIN" for enum envoy\.config\.cluster\.v3\.Cluster\.LbPolicy/);
  c.lb_policy = 4; // reserved (was ORIGINAL_DST_LB)
  expectFinding(validateEnvoyMessage(CLUSTER, c), 'pgv', 'lb_policy', /defined enum values/);
  c.lb_policy = 'round_robin';
  expectFinding(validateEnvoyMessage(CLUSTER, c), 'enum', 'lb_policy', /unknown value/);
});

test('class oneof: two members of a oneof, or none of a required oneof, are refused', () => {
  const r = goodRoute();
  (r.route as Obj).weighted_clusters = { clusters: [{ name: 'c', weight: 1 }] };
  expectFinding(validateEnvoyMessage(ROUTE, r), 'oneof', 'route', /oneof cluster_specifier .*at most one of cluster, weighted_clusters/);
  const none = goodRoute();
  delete (none.route as Obj).cluster;
  expectFinding(validateEnvoyMessage(ROUTE, none), 'oneof', 'route', /oneof cluster_specifier .*is required/);
  const m = goodRoute();
  (m.match as Obj).path = '/x';
  expectFinding(validateEnvoyMessage(ROUTE, m), 'oneof', 'match', /path_specifier/);
  // Cluster type vs cluster_type (extension): oneof cluster_discovery_type.
  const c = goodCluster();
  c.cluster_type = { name: 'x', typed_config: { '@type': 'type.googleapis.com/google.protobuf.Empty' } };
  expectFinding(validateEnvoyMessage(CLUSTER, c), 'oneof', '(root)', /cluster_discovery_type/);
});

test('class Any: typed_config needs a resolvable @type, and its body is checked as that type', () => {
  expectFinding(validateBootstrap(bootstrapWithFilter({ name: 'x', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.nosuch.v3.Nope' } })),
    'any', `${HF}.typed_config.@type`, /unknown type "envoy\.extensions\.filters\.http\.nosuch\.v3\.Nope"/);
  expectFinding(validateBootstrap(bootstrapWithFilter({ name: 'x', typed_config: { dynamic_stats: true } })),
    'any', `${HF}.typed_config`, /"@type" is required/);
  // Resolved lazily from Envoy's tree (not preloaded), and checked strictly.
  const ok = validateBootstrap(bootstrapWithFilter({ name: 'envoy.filters.http.buffer', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer', max_request_bytes: 1024 } }), STRICT);
  assert.ok(ok.ok, formatFindings(ok));
  expectFinding(validateBootstrap(bootstrapWithFilter({ name: 'b', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer' } })),
    'pgv', `${HF}.typed_config.max_request_bytes`, /required/);
  // Well-known types in Any carry their JSON form in "value".
  expectFinding(validateBootstrap(bootstrapWithFilter({ name: 'x', typed_config: { '@type': 'type.googleapis.com/google.protobuf.StringValue', value: 3 } })),
    'json', `${HF}.typed_config.value`, /expected a string/);
  // TypedStruct: the struct is checked as the message named by type_url.
  expectFinding(validateBootstrap(bootstrapWithFilter({ name: 'x', typed_config: {
    '@type': 'type.googleapis.com/xds.type.v3.TypedStruct',
    type_url: 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router', value: { dynamic_statz: true },
  } })), 'unknown-field', `${HF}.typed_config.value.dynamic_statz`, /unknown field/);
});

test('class PGV: required message, string min_len / pattern / in-list, numeric range, repeated min_items, durations', () => {
  const noMatch = goodRoute();
  delete noMatch.match;
  expectFinding(validateEnvoyMessage(ROUTE, noMatch), 'pgv', 'match', /value is required/);
  const unnamed = goodCluster();
  delete unnamed.name;
  expectFinding(validateEnvoyMessage(CLUSTER, unnamed), 'pgv', 'name', /at least 1 characters/);
  const pattern = goodRoute();
  pattern.match = { path_separated_prefix: '/api/' };
  expectFinding(validateEnvoyMessage(ROUTE, pattern), 'pgv', 'match.path_separated_prefix', /regex pattern/);
  const port = goodCluster();
  (port as any).load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = 70000;
  expectFinding(validateEnvoyMessage(CLUSTER, port), 'pgv',
    'load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value', /less than or equal to 65535/);
  const vh = { name: 'v', domains: [], routes: [goodRoute()] };
  expectFinding(validateEnvoyMessage('envoy.config.route.v3.VirtualHost', vh), 'pgv', 'domains', /at least 1 item/);
  const hdr = { ...goodRoute(), match: { prefix: '/', headers: [{ name: 'bad\nname', present_match: true }] } };
  expectFinding(validateEnvoyMessage(ROUTE, hdr), 'pgv', 'match.headers[0].name', /HTTP_HEADER_NAME/);
  expectFinding(validateEnvoyMessage('envoy.config.accesslog.v3.ResponseFlagFilter', { flags: ['UH', 'XX'] }), 'pgv', 'flags[1]', /must be in list/);
  assert.ok(validateEnvoyMessage('envoy.config.accesslog.v3.ResponseFlagFilter', { flags: ['UH', 'LH'] }).ok);
  const zero = goodCluster();
  zero.connect_timeout = '0s';
  expectFinding(validateEnvoyMessage(CLUSTER, zero), 'pgv', 'connect_timeout', /greater than 0s/);
  const malformed = goodCluster();
  malformed.connect_timeout = '1 second';
  expectFinding(validateEnvoyMessage(CLUSTER, malformed), 'json', 'connect_timeout', /invalid duration/);
  const kind = goodCluster();
  (kind as any).load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = 'http';
  expectFinding(validateEnvoyMessage(CLUSTER, kind), 'json',
    'load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value', /expected an integer/);
});

test('class deprecated: warned by default (as Envoy does), refused with deprecated: error; disallowed-by-default always refused', () => {
  const r = { ...goodRoute(), match: { prefix: '/', headers: [{ name: 'x', exact_match: 'a' }] } };
  const warn = validateEnvoyMessage(ROUTE, r);
  assert.ok(warn.ok);
  expectFinding(warn, 'deprecated', 'match.headers[0].exact_match', /field exact_match is deprecated/);
  const strict = validateEnvoyMessage(ROUTE, r, STRICT);
  assert.equal(strict.ok, false);
  assert.equal(strict.errors[0].class, 'deprecated');
  const api = validateEnvoyMessage('envoy.config.core.v3.ApiConfigSource', { api_type: 'DEPRECATED_AND_UNAVAILABLE_DO_NOT_USE' });
  expectFinding(api, 'disallowed', 'api_type', /disallowed by default/);
  assert.equal(api.ok, false);
});

test('EnvoyFilter: each patch value is checked as the message its applyTo implies; MERGE is partial', () => {
  assert.equal(ENVOY_FILTER_TYPES.HTTP_ROUTE, ROUTE);
  assert.equal(ENVOY_FILTER_TYPES.CLUSTER, CLUSTER);
  const ef = (applyTo: string, operation: string, value: unknown): Obj => ({
    apiVersion: 'networking.istio.io/v1alpha3', kind: 'EnvoyFilter', metadata: { name: 'x' },
    spec: { configPatches: [{ applyTo, match: { context: 'SIDECAR_OUTBOUND' }, patch: { operation, value } }] },
  });
  // A cluster body patched in as a route: refused (unknown fields, and a Route needs match/action).
  const wrong = validateEnvoyFilter(ef('HTTP_ROUTE', 'INSERT_FIRST', goodCluster()));
  expectFinding(wrong, 'unknown-field', 'spec.configPatches[0].patch.value.connect_timeout', /in envoy\.config\.route\.v3\.Route/);
  expectFinding(wrong, 'pgv', 'spec.configPatches[0].patch.value.match', /required/);
  // MERGE: a partial cluster is fine, but what it sets is still checked.
  assert.ok(validateEnvoyFilter(ef('CLUSTER', 'MERGE', { connect_timeout: '2s' })).ok);
  expectFinding(validateEnvoyFilter(ef('CLUSTER', 'MERGE', { connect_timeout: '0s' })), 'pgv', 'spec.configPatches[0].patch.value.connect_timeout', /greater than/);
  expectFinding(validateEnvoyFilter(ef('HTTP_FILTER', 'INSERT_BEFORE', { name: 'x', typed_config: { '@type': 'type.googleapis.com/nope.Nope' } })),
    'any', 'spec.configPatches[0].patch.value.typed_config.@type', /unknown type/);
  expectFinding(validateEnvoyFilter(ef('ROUTE', 'ADD', {})), 'json', 'spec.configPatches[0].applyTo', /unknown applyTo/);
  assert.ok(validateEnvoyFilter(ef('CLUSTER', 'REMOVE', undefined)).ok);
});

// --- Envoy >= 1.35 definitions the bundled (1.31) API lacks (scripts/envoy-api-1.35, NEWER_FIELDS) ---

const WASM = 'envoy.extensions.filters.http.wasm.v3.Wasm';
const OVERRIDE_HOST = 'envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost';
const wasmCfg = (extra: Obj): Obj => ({ config: { name: 'switchyard', root_id: 'switchyard', vm_config: { runtime: 'envoy.wasm.runtime.v8', code: { local: { filename: '/x.wasm' } } }, ...extra } });
const leastRequest = (): Obj => ({ policies: [{ typed_extension_config: { name: 'envoy.load_balancing_policies.least_request',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest' } } }] });
const overrideHostCluster = (oh: Obj): Obj => ({ ...goodCluster(), lb_policy: undefined, load_balancing_policy: { policies: [{ typed_extension_config: {
  name: 'envoy.load_balancing_policies.override_host', typed_config: { '@type': `type.googleapis.com/${OVERRIDE_HOST}`, ...oh } } }] } });

test('PluginConfig.allow_on_headers_stop_iteration (Envoy 1.35, BoolValue, field 9): accepted; misspelt or mistyped refused', () => {
  for (const v of [true, false]) assert.ok(validateEnvoyMessage(WASM, wasmCfg({ allow_on_headers_stop_iteration: v }), STRICT).ok);
  // the JSON name too, as Envoy's parser accepts it
  assert.ok(validateEnvoyMessage(WASM, wasmCfg({ allowOnHeadersStopIteration: true }), STRICT).ok);
  expectFinding(validateEnvoyMessage(WASM, wasmCfg({ allow_on_header_stop_iteration: true })), 'unknown-field',
    'config.allow_on_header_stop_iteration', /unknown field "allow_on_header_stop_iteration" in envoy\.extensions\.wasm\.v3\.PluginConfig/);
  expectFinding(validateEnvoyMessage(WASM, wasmCfg({ allow_on_headers_stop_iteration: 'true' })), 'json', 'config.allow_on_headers_stop_iteration', /expected a boolean/);
  expectFinding(validateEnvoyMessage(WASM, wasmCfg({ allow_on_headers_stop_iteration: 1 })), 'json', 'config.allow_on_headers_stop_iteration', /expected a boolean/);
  // the field sits on PluginConfig, not on the filter's Wasm wrapper or the VM config
  expectFinding(validateEnvoyMessage(WASM, { ...wasmCfg({}), allow_on_headers_stop_iteration: true }), 'unknown-field', 'allow_on_headers_stop_iteration', /in envoy\.extensions\.filters\.http\.wasm\.v3\.Wasm/);
});

test('the override_host policy (Envoy 1.35): a documented config is valid; misspelt, mistyped and PGV-violating fields are refused', () => {
  const good = { override_host_sources: [{ header: 'x-switchyard-endpoint' }, { metadata: { key: 'envoy.lb', path: [{ key: 'x-gateway-destination-endpoint' }] } }],
    fallback_policy: leastRequest() };
  const ok = validateEnvoyMessage(CLUSTER, overrideHostCluster(good), STRICT);
  assert.ok(ok.ok, formatFindings(ok));
  const TC = 'load_balancing_policy.policies[0].typed_extension_config.typed_config';
  expectFinding(validateEnvoyMessage(CLUSTER, overrideHostCluster({ ...good, override_hosts_sources: good.override_host_sources })), 'unknown-field',
    `${TC}.override_hosts_sources`, /unknown field "override_hosts_sources" in envoy\.extensions\.load_balancing_policies\.override_host\.v3\.OverrideHost/);
  expectFinding(validateEnvoyMessage(CLUSTER, overrideHostCluster({ ...good, override_host_sources: [] })), 'pgv', `${TC}.override_host_sources`, /at least 1 item/);
  expectFinding(validateEnvoyMessage(CLUSTER, overrideHostCluster({ override_host_sources: good.override_host_sources })), 'pgv', `${TC}.fallback_policy`, /required/);
  expectFinding(validateEnvoyMessage(CLUSTER, overrideHostCluster({ ...good, override_host_sources: [{ headr: 'x' }] })), 'unknown-field',
    `${TC}.override_host_sources[0].headr`, /OverrideHostSource/);
  expectFinding(validateEnvoyMessage(CLUSTER, overrideHostCluster({ ...good, override_host_sources: [{ header: 7 }] })), 'json', `${TC}.override_host_sources[0].header`, /expected a string/);
  expectFinding(validateEnvoyMessage(CLUSTER, overrideHostCluster({ ...good, override_host_sources: [{ header: 'bad\nvalue' }] })), 'pgv',
    `${TC}.override_host_sources[0].header`, /HTTP_HEADER_VALUE/);
  expectFinding(validateEnvoyMessage(CLUSTER, overrideHostCluster({ ...good, fallback_policy: 'LEAST_REQUEST' })), 'json', `${TC}.fallback_policy`, /expected an object/);
  expectFinding(validateEnvoyMessage(CLUSTER, overrideHostCluster({ ...good, selected_host_key: { key: 'envoy.lb', pth: [] } })), 'unknown-field', `${TC}.selected_host_key.pth`, /MetadataKey/);
  // resolvable by type URL, as Envoy resolves typed_config
  assert.ok(validateEnvoyMessage(OVERRIDE_HOST, good, STRICT).ok);
});
