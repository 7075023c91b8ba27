// Parses the subset of an Envoy v3 bootstrap the embedded proxy supports. Every field that is
// not understood makes loading fail with its path; only harmless fields are allow-listed.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import type { Endpoint } from './http-client';

export interface HeaderMatcher {
  name: string;
  kind: 'exact' | 'prefix' | 'suffix' | 'contains' | 'present';
  value?: string;
  present?: boolean;
  ignoreCase: boolean;
  invert: boolean;
}

export interface RouteConfig {
  name?: string;
  match: { prefix?: string; path?: string; caseSensitive: boolean; headers: HeaderMatcher[] };
  cluster?: string;
  weighted?: { name: string; weight: number }[];
  /** 0 disables the timeout. Envoy's default is 15 s. */
  timeoutMs: number;
  /** route.retry_policy (RetryPolicy): the conditions retried and how many retries (default 1). */
  retry?: RetryPolicyConfig;
}

/** The RetryPolicy subset the embedded router implements (router_filter retry_on values). */
export interface RetryPolicyConfig {
  /** connect-failure, reset, refused-stream, 5xx, gateway-error */
  on: Set<string>;
  numRetries: number;
}

/**
 * envoy.load_balancing_policies.override_host (Envoy >= 1.35), header sources only (the embedded
 * proxy has no dynamic metadata): the hosts named in the request, walked one per attempt, then
 * the fallback policy.
 */
export interface OverrideHostConfig {
  headers: string[];
  fallback: 'ROUND_ROBIN' | 'LEAST_REQUEST' | 'RANDOM';
}

export interface VirtualHostConfig {
  name: string;
  domains: string[];
  routes: RouteConfig[];
}

export interface ClusterConfig {
  name: string;
  type: 'STATIC' | 'STRICT_DNS' | 'LOGICAL_DNS' | 'ORIGINAL_DST';
  endpoints: Endpoint[];
  /** ORIGINAL_DST with use_http_header: the header carrying "ip:port". */
  originalDstHeader?: string;
  connectTimeoutMs?: number;
  /** load_balancing_policy with the override_host policy. */
  overrideHost?: OverrideHostConfig;
}

export interface WasmFilterConfig {
  name: string;
  rootId: string;
  vmId: string;
  runtime?: string;
  filename: string;
  configuration: string;
  vmConfiguration: string;
  failOpen: boolean;
  /** PluginConfig.allow_on_headers_stop_iteration (Envoy >= 1.35, BoolValue; unset = false). */
  allowOnHeadersStopIteration: boolean;
}

export interface ProxyConfig {
  /** bufferLimitBytes: per_connection_buffer_limit_bytes (unset: Envoy's 1 MiB default applies). */
  listener: { name: string; address: string; port: number; bufferLimitBytes?: number };
  admin?: { address: string; port: number };
  statPrefix: string;
  generateRequestId: boolean;
  virtualHosts: VirtualHostConfig[];
  /** undefined when the chain has only the router. */
  wasm?: WasmFilterConfig;
  clusters: Map<string, ClusterConfig>;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(`envoy config: ${message}`);
    this.name = 'ConfigError';
  }
}

type Obj = Record<string, unknown>;

const T_HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const T_WASM = 'type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm';
const T_ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';
const T_STRING = 'type.googleapis.com/google.protobuf.StringValue';
const T_OVERRIDE_HOST = 'type.googleapis.com/envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost';
const T_LB: Record<string, OverrideHostConfig['fallback']> = {
  'type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin': 'ROUND_ROBIN',
  'type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest': 'LEAST_REQUEST',
  'type.googleapis.com/envoy.extensions.load_balancing_policies.random.v3.Random': 'RANDOM',
};
const RETRY_ON = new Set(['connect-failure', 'reset', 'refused-stream', '5xx', 'gateway-error']);

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Checks that `v` is an object whose keys are all in `allowed`; returns it. */
function obj(v: unknown, at: string, allowed: string[], required: string[] = []): Obj {
  if (!isObj(v)) throw new ConfigError(`${at}: expected an object`);
  for (const k of Object.keys(v)) {
    if (!allowed.includes(k)) throw new ConfigError(`unsupported field ${at}.${k} (the embedded proxy does not implement it)`);
  }
  for (const k of required) if (v[k] === undefined) throw new ConfigError(`${at}.${k}: required`);
  return v;
}

function arr(v: unknown, at: string): unknown[] {
  if (!Array.isArray(v)) throw new ConfigError(`${at}: expected a list`);
  return v;
}

function str(v: unknown, at: string): string {
  if (typeof v !== 'string') throw new ConfigError(`${at}: expected a string`);
  return v;
}

function bool(v: unknown, at: string): boolean {
  if (typeof v !== 'boolean') throw new ConfigError(`${at}: expected true/false`);
  return v;
}

function int(v: unknown, at: string): number {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) throw new ConfigError(`${at}: expected a non-negative integer`);
  return n;
}

/** google.protobuf.Duration in YAML/JSON form ("1.5s") or {seconds, nanos}. */
export function durationMs(v: unknown, at: string): number {
  if (typeof v === 'string') {
    const m = /^(\d+(?:\.\d+)?)s$/.exec(v.trim());
    if (!m) throw new ConfigError(`${at}: expected a duration like "1.5s", got "${v}"`);
    return Math.round(Number(m[1]) * 1000);
  }
  if (isObj(v)) {
    const o = obj(v, at, ['seconds', 'nanos']);
    return int(o.seconds ?? 0, `${at}.seconds`) * 1000 + Math.round(int(o.nanos ?? 0, `${at}.nanos`) / 1e6);
  }
  throw new ConfigError(`${at}: expected a duration`);
}

function socketAddress(v: unknown, at: string): { address: string; port: number } {
  const a = obj(v, at, ['socket_address'], ['socket_address']);
  const s = obj(a.socket_address, `${at}.socket_address`, ['address', 'port_value', 'protocol'], ['address', 'port_value']);
  if (s.protocol !== undefined && s.protocol !== 'TCP') throw new ConfigError(`${at}.socket_address.protocol: only TCP is supported`);
  return { address: str(s.address, `${at}.socket_address.address`), port: int(s.port_value, `${at}.socket_address.port_value`) };
}

/** google.protobuf.UInt32Value / BoolValue in JSON form: the bare value (or {value} as some tools write). */
function uint32Value(v: unknown, at: string): number {
  return int(isObj(v) ? obj(v, at, ['value'], ['value']).value : v, at);
}
function boolValue(v: unknown, at: string): boolean {
  return bool(isObj(v) ? obj(v, at, ['value'], ['value']).value : v, at);
}

function stringValue(v: unknown, at: string): string {
  if (typeof v === 'string') return v;
  const o = obj(v, at, ['@type', 'value'], ['@type']);
  if (o['@type'] !== T_STRING) {
    throw new ConfigError(`${at}.@type: only ${T_STRING} is supported, got ${String(o['@type'])}`);
  }
  return o.value === undefined ? '' : str(o.value, `${at}.value`);
}

export interface LoadOptions {
  /** Base directory for relative paths (defaults to the YAML file's directory / cwd). */
  baseDir?: string;
}

export function loadEnvoyConfig(file: string): ProxyConfig {
  const text = readFileSync(file, 'utf8');
  return parseEnvoyConfig(text, { baseDir: path.dirname(path.resolve(file)) });
}

export function parseEnvoyConfig(text: string, opts: LoadOptions = {}): ProxyConfig {
  let doc: unknown;
  try {
    doc = YAML.parse(text);
  } catch (e) {
    throw new ConfigError(`invalid YAML: ${(e as Error).message}`);
  }
  const root = obj(doc, '(root)', ['static_resources', 'admin', 'node', 'layered_runtime'], ['static_resources']);
  if (root.layered_runtime !== undefined) {
    // Only an empty/static runtime layer list is harmless.
    const lr = obj(root.layered_runtime, 'layered_runtime', ['layers']);
    if (lr.layers !== undefined && arr(lr.layers, 'layered_runtime.layers').length > 0) {
      throw new ConfigError('unsupported field layered_runtime.layers (runtime overrides are not implemented)');
    }
  }
  if (root.node !== undefined) obj(root.node, 'node', ['id', 'cluster']);
  let admin: ProxyConfig['admin'];
  if (root.admin !== undefined) {
    const a = obj(root.admin, 'admin', ['address', 'access_log_path', 'access_log'], ['address']);
    admin = socketAddress(a.address, 'admin.address');
  }
  const sr = obj(root.static_resources, 'static_resources', ['listeners', 'clusters'], ['listeners']);
  const listeners = arr(sr.listeners, 'static_resources.listeners');
  if (listeners.length !== 1) throw new ConfigError(`static_resources.listeners: exactly one listener is supported (got ${listeners.length})`);
  const lAt = 'static_resources.listeners[0]';
  const l = obj(listeners[0], lAt, ['name', 'address', 'filter_chains', 'per_connection_buffer_limit_bytes'], ['address', 'filter_chains']);
  const listenAddr: ProxyConfig['listener'] = { name: '', ...socketAddress(l.address, `${lAt}.address`) };
  if (l.per_connection_buffer_limit_bytes !== undefined) {
    listenAddr.bufferLimitBytes = uint32Value(l.per_connection_buffer_limit_bytes, `${lAt}.per_connection_buffer_limit_bytes`);
  }
  const chains = arr(l.filter_chains, `${lAt}.filter_chains`);
  if (chains.length !== 1) throw new ConfigError(`${lAt}.filter_chains: exactly one filter chain is supported`);
  const fc = obj(chains[0], `${lAt}.filter_chains[0]`, ['filters', 'name'], ['filters']);
  const filters = arr(fc.filters, `${lAt}.filter_chains[0].filters`);
  if (filters.length !== 1) throw new ConfigError(`${lAt}.filter_chains[0].filters: exactly one network filter (http_connection_manager) is supported`);
  const fAt = `${lAt}.filter_chains[0].filters[0]`;
  const f = obj(filters[0], fAt, ['name', 'typed_config'], ['name', 'typed_config']);
  if (f.name !== 'envoy.filters.network.http_connection_manager') {
    throw new ConfigError(`${fAt}.name: only envoy.filters.network.http_connection_manager is supported`);
  }
  const hAt = `${fAt}.typed_config`;
  const hcm = obj(f.typed_config, hAt,
    ['@type', 'stat_prefix', 'codec_type', 'route_config', 'http_filters', 'generate_request_id'],
    ['@type', 'route_config', 'http_filters']);
  if (hcm['@type'] !== T_HCM) throw new ConfigError(`${hAt}.@type: expected ${T_HCM}`);
  if (hcm.codec_type !== undefined && !['AUTO', 'HTTP1'].includes(String(hcm.codec_type))) {
    throw new ConfigError(`${hAt}.codec_type: only AUTO/HTTP1 are supported`);
  }
  const generateRequestId = hcm.generate_request_id === undefined ? true : bool(hcm.generate_request_id, `${hAt}.generate_request_id`);

  // http filters: [wasm] then router
  const hf = arr(hcm.http_filters, `${hAt}.http_filters`);
  let wasm: WasmFilterConfig | undefined;
  hf.forEach((x, i) => {
    const at = `${hAt}.http_filters[${i}]`;
    const o = obj(x, at, ['name', 'typed_config'], ['name']);
    const name = str(o.name, `${at}.name`);
    const tc = o.typed_config === undefined ? undefined : obj(o.typed_config, `${at}.typed_config`, ['@type', 'config']);
    const type = tc?.['@type'];
    if (name === 'envoy.filters.http.router' || type === T_ROUTER) {
      if (i !== hf.length - 1) throw new ConfigError(`${at}: the router must be the last http filter`);
      if (tc && (type !== T_ROUTER || tc.config !== undefined)) throw new ConfigError(`${at}.typed_config: only an empty ${T_ROUTER} is supported`);
      return;
    }
    if (type === T_WASM || name === 'envoy.filters.http.wasm') {
      if (wasm) throw new ConfigError(`${at}: only one envoy.filters.http.wasm filter is supported`);
      if (!tc || type !== T_WASM) throw new ConfigError(`${at}.typed_config.@type: expected ${T_WASM}`);
      wasm = parseWasm(tc.config, `${at}.typed_config.config`, opts);
      return;
    }
    throw new ConfigError(`${at}: unsupported http filter ${name}`);
  });
  if (!hf.length || !(isObj(hf[hf.length - 1]) && ((hf[hf.length - 1] as Obj).name === 'envoy.filters.http.router'
    || ((hf[hf.length - 1] as Obj).typed_config as Obj | undefined)?.['@type'] === T_ROUTER))) {
    throw new ConfigError(`${hAt}.http_filters: the last filter must be envoy.filters.http.router`);
  }

  const rcAt = `${hAt}.route_config`;
  const rc = obj(hcm.route_config, rcAt, ['name', 'virtual_hosts'], ['virtual_hosts']);
  const virtualHosts = arr(rc.virtual_hosts, `${rcAt}.virtual_hosts`).map((v, i) => parseVirtualHost(v, `${rcAt}.virtual_hosts[${i}]`));

  const clusters = new Map<string, ClusterConfig>();
  arr(sr.clusters ?? [], 'static_resources.clusters').forEach((c, i) => {
    const cc = parseCluster(c, `static_resources.clusters[${i}]`);
    if (clusters.has(cc.name)) throw new ConfigError(`static_resources.clusters[${i}].name: duplicate cluster ${cc.name}`);
    clusters.set(cc.name, cc);
  });
  // Route targets must exist (Envoy validates clusters referenced by static routes).
  for (const vh of virtualHosts) {
    for (const r of vh.routes) {
      for (const name of r.cluster ? [r.cluster] : (r.weighted ?? []).map((w) => w.name)) {
        if (!clusters.has(name)) throw new ConfigError(`route in virtual host ${vh.name} refers to unknown cluster ${name}`);
      }
    }
  }

  return {
    listener: { ...listenAddr, name: typeof l.name === 'string' ? l.name : 'listener' },
    admin,
    statPrefix: typeof hcm.stat_prefix === 'string' ? hcm.stat_prefix : '',
    generateRequestId,
    virtualHosts,
    wasm,
    clusters,
  };
}

function parseWasm(v: unknown, at: string, opts: LoadOptions): WasmFilterConfig {
  const c = obj(v, at, ['name', 'root_id', 'vm_config', 'configuration', 'fail_open', 'allow_on_headers_stop_iteration'], ['vm_config']);
  const vcAt = `${at}.vm_config`;
  const vc = obj(c.vm_config, vcAt, ['vm_id', 'runtime', 'code', 'configuration', 'allow_precompiled'], ['code']);
  const code = obj(vc.code, `${vcAt}.code`, ['local'], ['local']);
  const local = obj(code.local, `${vcAt}.code.local`, ['filename'], ['filename']);
  const filename = str(local.filename, `${vcAt}.code.local.filename`);
  return {
    name: c.name === undefined ? '' : str(c.name, `${at}.name`),
    rootId: c.root_id === undefined ? '' : str(c.root_id, `${at}.root_id`),
    vmId: vc.vm_id === undefined ? '' : str(vc.vm_id, `${vcAt}.vm_id`),
    runtime: vc.runtime === undefined ? undefined : str(vc.runtime, `${vcAt}.runtime`),
    filename: path.resolve(opts.baseDir ?? process.cwd(), filename),
    configuration: c.configuration === undefined ? '' : stringValue(c.configuration, `${at}.configuration`),
    vmConfiguration: vc.configuration === undefined ? '' : stringValue(vc.configuration, `${vcAt}.configuration`),
    failOpen: c.fail_open === undefined ? false : bool(c.fail_open, `${at}.fail_open`),
    allowOnHeadersStopIteration: c.allow_on_headers_stop_iteration === undefined ? false
      : boolValue(c.allow_on_headers_stop_iteration, `${at}.allow_on_headers_stop_iteration`),
  };
}

function parseVirtualHost(v: unknown, at: string): VirtualHostConfig {
  const o = obj(v, at, ['name', 'domains', 'routes'], ['name', 'domains', 'routes']);
  return {
    name: str(o.name, `${at}.name`),
    domains: arr(o.domains, `${at}.domains`).map((d, i) => str(d, `${at}.domains[${i}]`).toLowerCase()),
    routes: arr(o.routes, `${at}.routes`).map((r, i) => parseRoute(r, `${at}.routes[${i}]`)),
  };
}

function parseRoute(v: unknown, at: string): RouteConfig {
  const o = obj(v, at, ['name', 'match', 'route'], ['match', 'route']);
  const m = obj(o.match, `${at}.match`, ['prefix', 'path', 'headers', 'case_sensitive']);
  if ((m.prefix === undefined) === (m.path === undefined)) {
    throw new ConfigError(`${at}.match: exactly one of prefix or path is required (others are not supported)`);
  }
  const headers = arr(m.headers ?? [], `${at}.match.headers`).map((h, i) => parseHeaderMatcher(h, `${at}.match.headers[${i}]`));
  const r = obj(o.route, `${at}.route`, ['cluster', 'weighted_clusters', 'timeout', 'retry_policy']);
  if ((r.cluster === undefined) === (r.weighted_clusters === undefined)) {
    throw new ConfigError(`${at}.route: exactly one of cluster or weighted_clusters is required`);
  }
  let weighted: RouteConfig['weighted'];
  if (r.weighted_clusters !== undefined) {
    const wAt = `${at}.route.weighted_clusters`;
    const w = obj(r.weighted_clusters, wAt, ['clusters', 'total_weight'], ['clusters']);
    weighted = arr(w.clusters, `${wAt}.clusters`).map((c, i) => {
      const cc = obj(c, `${wAt}.clusters[${i}]`, ['name', 'weight'], ['name', 'weight']);
      return { name: str(cc.name, `${wAt}.clusters[${i}].name`), weight: int(cc.weight, `${wAt}.clusters[${i}].weight`) };
    });
    if (!weighted.length) throw new ConfigError(`${wAt}.clusters: at least one cluster is required`);
    const total = weighted.reduce((a, b) => a + b.weight, 0);
    if (w.total_weight !== undefined && int(w.total_weight, `${wAt}.total_weight`) !== total) {
      throw new ConfigError(`${wAt}.total_weight: sum of weights is ${total}`);
    }
    if (total === 0) throw new ConfigError(`${wAt}: total weight must be > 0`);
  }
  return {
    name: o.name === undefined ? undefined : str(o.name, `${at}.name`),
    match: {
      prefix: m.prefix === undefined ? undefined : str(m.prefix, `${at}.match.prefix`),
      path: m.path === undefined ? undefined : str(m.path, `${at}.match.path`),
      caseSensitive: m.case_sensitive === undefined ? true : bool(m.case_sensitive, `${at}.match.case_sensitive`),
      headers,
    },
    cluster: r.cluster === undefined ? undefined : str(r.cluster, `${at}.route.cluster`),
    weighted,
    timeoutMs: r.timeout === undefined ? 15000 : durationMs(r.timeout, `${at}.route.timeout`),
    retry: r.retry_policy === undefined ? undefined : parseRetryPolicy(r.retry_policy, `${at}.route.retry_policy`),
  };
}

function parseRetryPolicy(v: unknown, at: string): RetryPolicyConfig {
  const o = obj(v, at, ['retry_on', 'num_retries']);
  const on = new Set<string>();
  if (o.retry_on !== undefined) {
    for (const c of str(o.retry_on, `${at}.retry_on`).split(',').map((x) => x.trim()).filter(Boolean)) {
      if (!RETRY_ON.has(c)) throw new ConfigError(`${at}.retry_on: unsupported condition ${c} (the embedded proxy implements ${[...RETRY_ON].join(', ')})`);
      on.add(c);
    }
  }
  // RetryPolicy.num_retries: UInt32Value, "defaults to 1".
  return { on, numRetries: o.num_retries === undefined ? 1 : uint32Value(o.num_retries, `${at}.num_retries`) };
}

/** Cluster.load_balancing_policy holding the override_host policy (the one the embedded proxy implements). */
function parseOverrideHost(v: unknown, at: string): OverrideHostConfig {
  const typed = (p: unknown, pAt: string): Obj => {
    const lb = obj(p, pAt, ['policies'], ['policies']);
    const ps = arr(lb.policies, `${pAt}.policies`);
    if (ps.length !== 1) throw new ConfigError(`${pAt}.policies: exactly one policy is supported`);
    const te = obj(obj(ps[0], `${pAt}.policies[0]`, ['typed_extension_config'], ['typed_extension_config']).typed_extension_config,
      `${pAt}.policies[0].typed_extension_config`, ['name', 'typed_config'], ['typed_config']);
    return obj(te.typed_config, `${pAt}.policies[0].typed_extension_config.typed_config`,
      ['@type', 'override_host_sources', 'fallback_policy', 'selected_host_key', 'choice_count', 'slow_start_config', 'active_request_bias', 'locality_lb_config'], ['@type']);
  };
  const tAt = `${at}.policies[0].typed_extension_config.typed_config`;
  const oh = typed(v, at);
  if (oh['@type'] !== T_OVERRIDE_HOST) throw new ConfigError(`${tAt}.@type: only ${T_OVERRIDE_HOST} is supported`);
  for (const k of Object.keys(oh)) if (!['@type', 'override_host_sources', 'fallback_policy'].includes(k)) throw new ConfigError(`unsupported field ${tAt}.${k}`);
  const srcs = arr(oh.override_host_sources, `${tAt}.override_host_sources`);
  // OverrideHost.override_host_sources: min_items 1; each source names a header or a metadata key.
  if (!srcs.length) throw new ConfigError(`${tAt}.override_host_sources: at least one source is required`);
  const headers = srcs.map((x, i) => {
    const sAt = `${tAt}.override_host_sources[${i}]`;
    const so = obj(x, sAt, ['header', 'metadata']);
    if (so.metadata !== undefined) throw new ConfigError(`${sAt}.metadata: metadata sources are not implemented (the embedded proxy has no dynamic metadata)`);
    const h = so.header === undefined ? '' : str(so.header, `${sAt}.header`);
    if (!h) throw new ConfigError(`${sAt}: Empty override source`);
    return h.toLowerCase();
  });
  if (oh.fallback_policy === undefined) throw new ConfigError(`${tAt}.fallback_policy: required`);
  const fAt = `${tAt}.fallback_policy`;
  const fb = typed(oh.fallback_policy, fAt);
  const kind = T_LB[String(fb['@type'])];
  if (!kind) throw new ConfigError(`${fAt}.policies[0].typed_extension_config.typed_config.@type: unsupported fallback ${String(fb['@type'])}`);
  return { headers, fallback: kind };
}

function parseHeaderMatcher(v: unknown, at: string): HeaderMatcher {
  const o = obj(v, at, ['name', 'string_match', 'exact_match', 'present_match', 'invert_match'], ['name']);
  const name = str(o.name, `${at}.name`).toLowerCase();
  const invert = o.invert_match === undefined ? false : bool(o.invert_match, `${at}.invert_match`);
  const kinds = ['string_match', 'exact_match', 'present_match'].filter((k) => o[k] !== undefined);
  if (kinds.length !== 1) throw new ConfigError(`${at}: exactly one of string_match, exact_match, present_match is required`);
  if (o.exact_match !== undefined) return { name, kind: 'exact', value: str(o.exact_match, `${at}.exact_match`), ignoreCase: false, invert };
  if (o.present_match !== undefined) return { name, kind: 'present', present: bool(o.present_match, `${at}.present_match`), ignoreCase: false, invert };
  const sm = obj(o.string_match, `${at}.string_match`, ['exact', 'prefix', 'suffix', 'contains', 'ignore_case']);
  const sk = (['exact', 'prefix', 'suffix', 'contains'] as const).filter((k) => sm[k] !== undefined);
  if (sk.length !== 1) throw new ConfigError(`${at}.string_match: exactly one of exact, prefix, suffix, contains is required`);
  return {
    name, kind: sk[0], value: str(sm[sk[0]], `${at}.string_match.${sk[0]}`),
    ignoreCase: sm.ignore_case === undefined ? false : bool(sm.ignore_case, `${at}.string_match.ignore_case`), invert,
  };
}

/**
 * Envoy's HeaderMatcher evaluation (HeaderUtility::HeaderData::matchesHeaders) over all values of
 * the header (`values`, joined with "," as Envoy does for repeated headers). A missing header only
 * matches a presence test: `present_match: false`, or `present_match: true` inverted. Every other
 * matcher does NOT match a missing header, inverted or not (route_components.proto,
 * treat_missing_header_as_empty: "the header matcher rule ... will be ignored so it will not match")
 * — so `invert_match` on `exact: normal` does not catch a request without the header.
 */
export function headerMatcherMatches(m: HeaderMatcher, values: readonly string[]): boolean {
  if (!values.length) {
    return m.kind === 'present' && (m.invert ? m.present === true : m.present === false);
  }
  let r: boolean;
  if (m.kind === 'present') {
    r = m.present === true;
  } else {
    let v = values.join(',');
    let want = m.value ?? '';
    if (m.ignoreCase) {
      v = v.toLowerCase();
      want = want.toLowerCase();
    }
    r = m.kind === 'exact' ? v === want : m.kind === 'prefix' ? v.startsWith(want)
      : m.kind === 'suffix' ? v.endsWith(want) : v.includes(want);
  }
  return m.invert ? !r : r;
}

function parseCluster(v: unknown, at: string): ClusterConfig {
  const o = obj(v, at, ['name', 'type', 'connect_timeout', 'lb_policy', 'load_balancing_policy', 'load_assignment', 'original_dst_lb_config',
    'dns_lookup_family', 'respect_dns_ttl', 'dns_refresh_rate'], ['name']);
  const name = str(o.name, `${at}.name`);
  const type = o.type === undefined ? 'STATIC' : str(o.type, `${at}.type`);
  if (!['STATIC', 'STRICT_DNS', 'LOGICAL_DNS', 'ORIGINAL_DST'].includes(type)) {
    throw new ConfigError(`${at}.type: unsupported cluster type ${type}`);
  }
  const lb = o.lb_policy === undefined ? 'ROUND_ROBIN' : str(o.lb_policy, `${at}.lb_policy`);
  const cc: ClusterConfig = { name, type: type as ClusterConfig['type'], endpoints: [] };
  if (o.connect_timeout !== undefined) cc.connectTimeoutMs = durationMs(o.connect_timeout, `${at}.connect_timeout`);
  if (type === 'ORIGINAL_DST') {
    // OriginalDstClusterFactory::createClusterImpl checks.
    if (lb !== 'CLUSTER_PROVIDED') {
      throw new ConfigError(`${at}: cluster: LB policy ${lb} is not valid for Cluster type ORIGINAL_DST. Only 'CLUSTER_PROVIDED' is allowed with cluster type 'ORIGINAL_DST'`);
    }
    if (o.load_assignment !== undefined) throw new ConfigError(`${at}: ORIGINAL_DST clusters must have no load assignment configured`);
    if (o.original_dst_lb_config !== undefined) {
      const od = obj(o.original_dst_lb_config, `${at}.original_dst_lb_config`, ['use_http_header', 'http_header_name']);
      const use = od.use_http_header === undefined ? false : bool(od.use_http_header, `${at}.original_dst_lb_config.use_http_header`);
      const hn = od.http_header_name === undefined ? '' : str(od.http_header_name, `${at}.original_dst_lb_config.http_header_name`);
      if (!use && hn) {
        throw new ConfigError(`${at}: ORIGINAL_DST cluster: invalid config http_header_name=${hn} and use_http_header is false. Set use_http_header to true if http_header_name is desired.`);
      }
      if (use) cc.originalDstHeader = (hn || 'x-envoy-original-dst-host').toLowerCase();
    }
    if (!cc.originalDstHeader) {
      throw new ConfigError(`${at}: ORIGINAL_DST without original_dst_lb_config.use_http_header needs iptables-redirected connections, which the embedded proxy does not have`);
    }
    return cc;
  }
  if (!['ROUND_ROBIN', 'RANDOM', 'LEAST_REQUEST'].includes(lb)) throw new ConfigError(`${at}.lb_policy: unsupported ${lb}`);
  if (o.load_balancing_policy !== undefined) {
    // Envoy: load_balancing_policy takes precedence over lb_policy; the embedded proxy wants one.
    if (o.lb_policy !== undefined) throw new ConfigError(`${at}: set either lb_policy or load_balancing_policy, not both`);
    cc.overrideHost = parseOverrideHost(o.load_balancing_policy, `${at}.load_balancing_policy`);
  }
  if (o.original_dst_lb_config !== undefined) throw new ConfigError(`${at}.original_dst_lb_config: only valid for ORIGINAL_DST clusters`);
  const la = obj(o.load_assignment, `${at}.load_assignment`, ['cluster_name', 'endpoints'], ['endpoints']);
  arr(la.endpoints, `${at}.load_assignment.endpoints`).forEach((e, i) => {
    const eAt = `${at}.load_assignment.endpoints[${i}]`;
    const eo = obj(e, eAt, ['lb_endpoints', 'locality'], ['lb_endpoints']);
    arr(eo.lb_endpoints, `${eAt}.lb_endpoints`).forEach((le, j) => {
      const lAt = `${eAt}.lb_endpoints[${j}]`;
      const leo = obj(le, lAt, ['endpoint'], ['endpoint']);
      const ep = obj(leo.endpoint, `${lAt}.endpoint`, ['address'], ['address']);
      cc.endpoints.push(socketAddress(ep.address, `${lAt}.endpoint.address`));
    });
  });
  return cc;
}
