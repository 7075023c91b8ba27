// Validates Envoy configuration (YAML/JSON already parsed to plain values) as Envoy loads it:
// proto3 JSON mapping onto Envoy's data-plane-api messages (the protos bundled by
// @grpc/grpc-js-xds, about Envoy 1.31, plus the Envoy >= 1.35 definitions the shipped configs use:
// NEWER_API / NEWER_FIELDS below), strictly — unknown fields, enum names, oneofs,
// `Any`/`typed_config` resolved through `@type` (and TypedStruct), the protoc-gen-validate
// rules each field carries, deprecated and disallowed-by-default fields and enum values.
//
// No Envoy binary runs here; this is the check that stands in for `envoy --mode validate`.
// It does not do Envoy's cross-reference checks (cluster names of routes etc.): the embedded
// host (host/src/envoy-config.ts) and test/packaging do those.
//
// protobufjs 8 (the project's own devDependency, pinned by our lockfile) rather than the 7.x that
// @grpc/grpc-js-xds nests for its own loader: the validator must not change when that package
// updates its internals, and 8 parses every bundled proto with the structured `parsedOptions`
// the PGV rules need.
//
// Usage: tsx scripts/envoy-proto.ts envoy/envoy.yaml  (a Bootstrap; exits 1 on errors).

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';

export type FindingClass =
  | 'json' // wrong JSON kind for the field (object vs string vs number ...)
  | 'unknown-field'
  | 'enum'
  | 'oneof'
  | 'any' // @type missing or not resolvable
  | 'pgv' // a protoc-gen-validate rule
  | 'deprecated'
  | 'disallowed';

export interface Finding {
  /** path in the document, e.g. static_resources.clusters[0].connect_timeout */
  path: string;
  class: FindingClass;
  message: string;
}

export interface ValidateOptions {
  /**
   * Deprecated fields / enum values: 'warn' (Envoy's behaviour: it loads them and counts
   * runtime.deprecated_feature_use) or 'error' (what the project ships must not use them).
   * Default 'warn'. Fields and enum values that Envoy disallows by default are always errors.
   */
  deprecated?: 'warn' | 'error';
  /**
   * A partial message (Istio EnvoyFilter MERGE): only the fields present are checked; rules
   * that concern absent fields (required, min_len of an unset string, min_items, required oneofs)
   * are skipped.
   */
  partial?: boolean;
}

export interface ValidationResult {
  ok: boolean;
  errors: Finding[];
  warnings: Finding[];
}

const DEPS = path.resolve(__dirname, '..', 'node_modules', '@grpc', 'grpc-js-xds', 'deps');
/**
 * Envoy >= 1.35 definitions the bundled (1.31) API lacks and the shipped configs use, written from
 * Envoy's documented API: whole packages as .proto files here (override_host), and fields added to
 * bundled messages below (NEWER_FIELDS). Searched first.
 */
const NEWER_API = path.resolve(__dirname, 'envoy-api-1.35');
/**
 * Fields of bundled messages that appeared after Envoy 1.31: [message, field, number, type].
 * PluginConfig.allow_on_headers_stop_iteration (Envoy 1.35, google.protobuf.BoolValue, field 9;
 * 7 and 8 are failure_policy and reload_config, added in 1.34, not used by the shipped configs).
 */
const NEWER_FIELDS: [string, string, number, string][] = [
  ['envoy.extensions.wasm.v3.PluginConfig', 'allow_on_headers_stop_iteration', 9, 'google.protobuf.BoolValue'],
];
const INCLUDES = [
  NEWER_API,
  path.join(DEPS, 'envoy-api'),
  path.join(DEPS, 'xds'),
  path.join(DEPS, 'protoc-gen-validate'),
  path.join(DEPS, 'googleapis'),
  // google/protobuf/descriptor.proto (the other well-known types are built into protobufjs)
  path.resolve(__dirname, '..', 'node_modules', 'protobufjs'),
];

let cachedRoot: protobuf.Root | undefined;
const loadedDirs = new Set<string>();

function root(): protobuf.Root {
  if (cachedRoot) return cachedRoot;
  const r = new protobuf.Root();
  r.resolvePath = (_origin: string, target: string): string => {
    for (const inc of INCLUDES) {
      const p = path.join(inc, target);
      if (existsSync(p)) return p;
    }
    return target;
  };
  r.loadSync(['envoy/config/bootstrap/v3/bootstrap.proto'], { keepCase: true });
  addNewerFields(r);
  r.resolveAll();
  cachedRoot = r;
  return r;
}

/** Loads every .proto of the package that `fullName` lives in (lazily, once per package). */
function loadPackageOf(fullName: string): void {
  const parts = fullName.split('.');
  const pkg: string[] = [];
  for (const p of parts) {
    if (/^[A-Z]/.test(p)) break;
    pkg.push(p);
  }
  const rel = pkg.join('/');
  if (loadedDirs.has(rel)) return;
  loadedDirs.add(rel);
  const files: string[] = [];
  for (const inc of INCLUDES.slice(0, 5)) {
    const dir = path.join(inc, rel);
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir)) if (f.endsWith('.proto')) files.push(path.join(rel, f));
  }
  if (!files.length) return;
  const r = root();
  r.loadSync(files, { keepCase: true });
  addNewerFields(r);
  r.resolveAll();
}

/** NEWER_FIELDS into the messages loaded so far (each once). */
function addNewerFields(r: protobuf.Root): void {
  for (const [msg, name, id, type] of NEWER_FIELDS) {
    const t = r.lookup(`.${msg}`);
    if (!(t instanceof protobuf.Type) || t.fields[name]) continue;
    if (t.fieldsById[id]) throw new Error(`envoy-proto: ${msg} already has field ${id} (${t.fieldsById[id].name}); the bundled API changed`);
    const f = new protobuf.Field(name, id, `.${type}`);
    t.add(f);
    f.resolve();
  }
}

/** The message type `fullName` (e.g. envoy.config.cluster.v3.Cluster), or undefined. */
export function lookupMessage(fullName: string): protobuf.Type | undefined {
  const find = (): protobuf.Type | undefined => {
    const t = root().lookup(fullName.startsWith('.') ? fullName : `.${fullName}`);
    return t instanceof protobuf.Type ? t : undefined;
  };
  let t = find();
  if (!t) {
    loadPackageOf(fullName);
    t = find();
  }
  return t;
}

// --- helpers ------------------------------------------------------------------------------------

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const jsonName = (n: string): string => n.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
const kindOf = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

const INT_RANGES: Record<string, [bigint, bigint]> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n], sint32: [-(2n ** 31n), 2n ** 31n - 1n], sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n], fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n], sint64: [-(2n ** 63n), 2n ** 63n - 1n], sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n], fixed64: [0n, 2n ** 64n - 1n],
};

const WRAPPERS: Record<string, string> = {
  'google.protobuf.DoubleValue': 'double', 'google.protobuf.FloatValue': 'float',
  'google.protobuf.Int64Value': 'int64', 'google.protobuf.UInt64Value': 'uint64',
  'google.protobuf.Int32Value': 'int32', 'google.protobuf.UInt32Value': 'uint32',
  'google.protobuf.BoolValue': 'bool', 'google.protobuf.StringValue': 'string', 'google.protobuf.BytesValue': 'bytes',
};
/** Well-known types whose JSON form is not an object of their fields (inside Any: {"@type", "value"}). */
const SPECIAL_JSON = new Set([...Object.keys(WRAPPERS), 'google.protobuf.Duration', 'google.protobuf.Timestamp',
  'google.protobuf.FieldMask', 'google.protobuf.Struct', 'google.protobuf.Value', 'google.protobuf.ListValue']);
const TYPED_STRUCT = new Set(['udpa.type.v1.TypedStruct', 'xds.type.v3.TypedStruct']);

const DURATION_RE = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/;
const MAX_DURATION_S = 315576000000n;

/** Duration JSON → nanoseconds, or undefined when malformed / out of range. */
function durationNs(v: string): bigint | undefined {
  const m = DURATION_RE.exec(v);
  if (!m) return undefined;
  const s = BigInt(m[2]);
  if (s > MAX_DURATION_S) return undefined;
  const ns = s * 1_000_000_000n + BigInt((m[3] ?? '').padEnd(9, '0') || '0');
  return m[1] ? -ns : ns;
}
/** PGV's Duration constant ({seconds, nanos}, both optional) → nanoseconds. */
const pgvDurationNs = (d: unknown): bigint => {
  const o = isObj(d) ? d : {};
  return BigInt(Number(o.seconds ?? 0)) * 1_000_000_000n + BigInt(Number(o.nanos ?? 0));
};

const HEADER_NAME_STRICT = /^:?[0-9a-zA-Z!#$%&'*+\-.^_|~`]+$/;
// eslint-disable-next-line no-control-regex
const HEADER_VALUE_STRICT = /^[^\u0000-\u0008\u000A-\u001F\u007F]*$/;
// eslint-disable-next-line no-control-regex
const HEADER_LOOSE = /^[^\u0000\u000A\u000D]*$/;

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const isIpv6 = (s: string): boolean => {
  try {
    return new URL(`http://[${s}]/`).hostname.length > 2;
  } catch {
    return false;
  }
};
const HOSTNAME = /^(?=.{1,253}$)([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\.?$/;

const asList = (v: unknown): unknown[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

// --- the validator ------------------------------------------------------------------------------

class Checker {
  readonly errors: Finding[] = [];
  readonly warnings: Finding[] = [];
  constructor(private readonly opts: ValidateOptions) {}

  err(at: string, cls: FindingClass, message: string): void {
    this.errors.push({ path: at, class: cls, message });
  }

  deprecated(at: string, what: string, disallowed: boolean): void {
    if (disallowed) {
      this.err(at, 'disallowed', `${what} is deprecated and disallowed by default in Envoy (needs a runtime override)`);
    } else if (this.opts.deprecated === 'error') {
      this.err(at, 'deprecated', `${what} is deprecated`);
    } else {
      this.warnings.push({ path: at, class: 'deprecated', message: `${what} is deprecated` });
    }
  }

  /** A message in its JSON form (not a well-known type with special JSON). */
  message(t: protobuf.Type, v: unknown, at: string, partial: boolean): void {
    const full = t.fullName.replace(/^\./, '');
    if (SPECIAL_JSON.has(full) || full === 'google.protobuf.Any') {
      this.wellKnown(full, v, at, partial);
      return;
    }
    if (!isObj(v)) {
      this.err(at, 'json', `expected an object for ${full}, got ${kindOf(v)}`);
      return;
    }
    const byName = new Map<string, protobuf.Field>();
    for (const f of t.fieldsArray) {
      byName.set(f.name, f);
      byName.set(jsonName(f.name), f);
    }
    const seen = new Map<protobuf.Field, string>();
    for (const [k, val] of Object.entries(v)) {
      const f = byName.get(k);
      const fAt = at ? `${at}.${k}` : k;
      if (!f) {
        this.err(fAt, 'unknown-field', `unknown field "${k}" in ${full}`);
        continue;
      }
      if (seen.has(f)) {
        this.err(fAt, 'json', `field ${f.name} set twice (as "${seen.get(f)}" and "${k}")`);
        continue;
      }
      seen.set(f, k);
    }
    // oneofs: at most one member set (null = unset); (validate.required) = exactly one.
    for (const o of t.oneofsArray) {
      const set = o.fieldsArray.filter((f) => seen.has(f) && v[seen.get(f)!] !== null);
      if (set.length > 1) {
        this.err(at || '(root)', 'oneof', `oneof ${o.name} of ${full}: at most one of ${set.map((f) => f.name).join(', ')} may be set`);
      } else if (!set.length && !partial && o.options?.['(validate.required)'] === true) {
        this.err(at || '(root)', 'oneof', `oneof ${o.name} of ${full}: one of ${o.fieldsArray.map((f) => f.name).join(', ')} is required`);
      }
    }
    for (const f of t.fieldsArray) {
      const key = seen.get(f);
      const val = key === undefined ? undefined : v[key];
      const fAt = at ? `${at}.${key ?? f.name}` : (key ?? f.name);
      this.field(f, val === null ? undefined : val, fAt, partial);
    }
  }

  private field(f: protobuf.Field, v: unknown, at: string, partial: boolean): void {
    const rules = fieldRules(f);
    const inOneof = !!f.partOf;
    const hasPresence = inOneof || !!f.options?.proto3_optional;
    if (v !== undefined && f.options?.deprecated === true && !isDefault(f, v)) {
      this.deprecated(at, `field ${f.name}`, f.options?.['(envoy.annotations.disallowed_by_default)'] === true);
    }
    if (f.map) {
      if (v === undefined) {
        if (!partial && rules?.map?.min_pairs) this.err(at, 'pgv', `value must contain at least ${rules.map.min_pairs} pair(s)`);
        return;
      }
      if (!isObj(v)) return this.err(at, 'json', `expected an object (map), got ${kindOf(v)}`);
      const n = Object.keys(v).length;
      if (rules?.map?.min_pairs !== undefined && n < Number(rules.map.min_pairs)) this.err(at, 'pgv', `value must contain at least ${rules.map.min_pairs} pair(s)`);
      if (rules?.map?.max_pairs !== undefined && n > Number(rules.map.max_pairs)) this.err(at, 'pgv', `value must contain no more than ${rules.map.max_pairs} pair(s)`);
      const keyType = (f as unknown as protobuf.MapField).keyType;
      for (const [k, val] of Object.entries(v)) {
        if (keyType !== 'string') this.scalar(keyType, k, `${at}[${JSON.stringify(k)}]`, true);
        if (rules?.map?.keys) this.scalarRules(keyType, k, rules.map.keys, `${at}[${JSON.stringify(k)}] (key)`);
        this.single(f, val, `${at}[${JSON.stringify(k)}]`, partial, rules?.map?.values, true);
      }
      return;
    }
    if (f.repeated) {
      const items = v === undefined ? [] : v;
      if (!Array.isArray(items)) return this.err(at, 'json', `expected an array, got ${kindOf(v)}`);
      const r = rules?.repeated;
      if (r && !(r.ignore_empty && items.length === 0) && !(partial && v === undefined)) {
        if (r.min_items !== undefined && items.length < Number(r.min_items)) this.err(at, 'pgv', `value must contain at least ${r.min_items} item(s)`);
        if (r.max_items !== undefined && items.length > Number(r.max_items)) this.err(at, 'pgv', `value must contain no more than ${r.max_items} item(s)`);
        if (r.unique && new Set(items.map((x) => JSON.stringify(x))).size !== items.length) this.err(at, 'pgv', 'repeated value must contain unique items');
      }
      items.forEach((x, i) => this.single(f, x, `${at}[${i}]`, partial, r?.items, true));
      return;
    }
    this.single(f, v, at, partial, rules, hasPresence);
  }

  /** One value (a singular field, a repeated item, a map value). `present`: rules apply only if set. */
  private single(f: protobuf.Field, v: unknown, at: string, partial: boolean, rules: Rules | undefined, presence: boolean): void {
    const rt = f.resolvedType;
    if (rt instanceof protobuf.Type) {
      const full = rt.fullName.replace(/^\./, '');
      if (v === undefined) {
        const required = rules?.message?.required === true || rules?.duration?.required === true
          || rules?.timestamp?.required === true || rules?.any?.required === true;
        // A oneof member's rules apply only when that member is the one set.
        if (required && !partial && !f.partOf) this.err(at, 'pgv', 'value is required');
        return;
      }
      if (rules?.message?.skip) return;
      this.message(rt, v, at, partial);
      if (rules) this.messageRules(full, v, rules, at);
      return;
    }
    if (rt instanceof protobuf.Enum) {
      if (v === undefined) {
        if (!presence && !partial && rules?.enum) this.enumRules(rt, 0, rules, at);
        return;
      }
      const n = this.enumValue(rt, v, at);
      if (n !== undefined && rules) this.enumRules(rt, n, rules, at);
      return;
    }
    if (v === undefined) {
      // proto3 scalar without presence: the rules apply to the default value, as in PGV.
      if (presence || partial || !rules) return;
      this.scalarRules(f.type, defaultOf(f.type), rules, at);
      return;
    }
    const parsed = this.scalar(f.type, v, at, false);
    if (parsed !== undefined && rules) this.scalarRules(f.type, parsed, rules, at);
  }

  private enumValue(e: protobuf.Enum, v: unknown, at: string): number | undefined {
    const full = e.fullName.replace(/^\./, '');
    let n: number | undefined;
    let name: string | undefined;
    if (typeof v === 'string') {
      if (!(v in e.values)) {
        this.err(at, 'enum', `unknown value "${v}" for enum ${full} (one of ${Object.keys(e.values).join(', ')})`);
        return undefined;
      }
      n = e.values[v];
      name = v;
    } else if (typeof v === 'number' && Number.isInteger(v)) {
      n = v;
      name = e.valuesById[v];
    } else {
      this.err(at, 'json', `expected an enum name of ${full}, got ${kindOf(v)}`);
      return undefined;
    }
    const vo = name ? e.valuesOptions?.[name] : undefined;
    if (name && vo?.deprecated === true && n !== 0) {
      this.deprecated(at, `enum value ${name}`, vo['(envoy.annotations.disallowed_by_default_enum)'] === true);
    } else if (name && vo?.['(envoy.annotations.disallowed_by_default_enum)'] === true) {
      this.deprecated(at, `enum value ${name}`, true);
    }
    return n;
  }

  private enumRules(e: protobuf.Enum, n: number, rules: Rules, at: string): void {
    const r = rules.enum;
    if (!r) return;
    if (r.defined_only && e.valuesById[n] === undefined) this.err(at, 'pgv', `value must be one of the defined enum values (got ${n})`);
    if (r.const !== undefined && n !== Number(r.const)) this.err(at, 'pgv', `value must equal ${r.const}`);
    const inL = asList(r.in).map(Number);
    if (inL.length && !inL.includes(n)) this.err(at, 'pgv', `value must be in list ${inL.join(', ')}`);
    const notIn = asList(r.not_in).map(Number);
    if (notIn.includes(n)) this.err(at, 'pgv', `value must not be in list ${notIn.map((x) => e.valuesById[x] ?? x).join(', ')}`);
  }

  /** Parses a scalar's JSON form; returns a number/bigint/string/boolean, or undefined after an error. */
  private scalar(type: string, v: unknown, at: string, mapKey: boolean): unknown {
    if (type in INT_RANGES) {
      let b: bigint;
      if (typeof v === 'number' && Number.isInteger(v)) b = BigInt(v);
      else if (typeof v === 'string' && /^-?\d+$/.test(v)) b = BigInt(v);
      else {
        this.err(at, 'json', `expected an integer (${type}), got ${mapKey ? `key "${String(v)}"` : kindOf(v)}`);
        return undefined;
      }
      const [lo, hi] = INT_RANGES[type];
      if (b < lo || b > hi) {
        this.err(at, 'json', `${b} is out of range for ${type}`);
        return undefined;
      }
      return b;
    }
    switch (type) {
      case 'double':
      case 'float':
        if (typeof v === 'number') return v;
        if (typeof v === 'string' && (['NaN', 'Infinity', '-Infinity'].includes(v) || (v.trim() !== '' && Number.isFinite(Number(v))))) return Number(v);
        this.err(at, 'json', `expected a number (${type}), got ${kindOf(v)}`);
        return undefined;
      case 'bool':
        if (typeof v === 'boolean') return v;
        if (mapKey && (v === 'true' || v === 'false')) return v === 'true';
        this.err(at, 'json', `expected a boolean, got ${kindOf(v)}`);
        return undefined;
      case 'string':
        if (typeof v === 'string') return v;
        this.err(at, 'json', `expected a string, got ${kindOf(v)}`);
        return undefined;
      case 'bytes':
        if (typeof v === 'string' && /^[A-Za-z0-9+/_-]*={0,2}$/.test(v)) return Buffer.from(v, 'base64');
        this.err(at, 'json', `expected base64 bytes, got ${kindOf(v)}`);
        return undefined;
      default:
        this.err(at, 'json', `unsupported scalar type ${type}`);
        return undefined;
    }
  }

  private scalarRules(type: string, v: unknown, rules: Rules, at: string): void {
    if (type === 'string') return this.stringRules(String(v), rules.string, at);
    if (type === 'bool') {
      if (rules.bool?.const !== undefined && v !== rules.bool.const) this.err(at, 'pgv', `value must equal ${rules.bool.const}`);
      return;
    }
    if (type === 'bytes') {
      const b = v as Buffer;
      const r = rules.bytes;
      if (!r) return;
      if (r.min_len !== undefined && b.length < Number(r.min_len)) this.err(at, 'pgv', `value length must be at least ${r.min_len} bytes`);
      if (r.max_len !== undefined && b.length > Number(r.max_len)) this.err(at, 'pgv', `value length must be at most ${r.max_len} bytes`);
      if (r.len !== undefined && b.length !== Number(r.len)) this.err(at, 'pgv', `value length must be ${r.len} bytes`);
      return;
    }
    const r = rules[type as keyof Rules] as NumRules | undefined;
    if (!r) return;
    this.numeric(typeof v === 'bigint' ? Number(v) : Number(v), r, at);
  }

  private numeric(n: number, r: NumRules, at: string): void {
    if (r.ignore_empty && n === 0) return;
    if (r.const !== undefined && n !== Number(r.const)) this.err(at, 'pgv', `value must equal ${r.const}`);
    const inL = asList(r.in).map(Number);
    if (inL.length && !inL.includes(n)) this.err(at, 'pgv', `value must be in list [${inL.join(', ')}]`);
    if (asList(r.not_in).map(Number).includes(n)) this.err(at, 'pgv', `value must not be in list [${asList(r.not_in).join(', ')}]`);
    this.range(n, r.gt === undefined ? undefined : Number(r.gt), r.gte === undefined ? undefined : Number(r.gte),
      r.lt === undefined ? undefined : Number(r.lt), r.lte === undefined ? undefined : Number(r.lte), at, String);
  }

  /** PGV range semantics, including an inverted (exclusive) range when the upper bound is below the lower. */
  private range<T extends number | bigint>(n: T, gt: T | undefined, gte: T | undefined, lt: T | undefined, lte: T | undefined, at: string,
    show: (x: T) => string): void {
    const lo = gt ?? gte;
    const hi = lt ?? lte;
    const aboveLo = lo === undefined ? true : gt !== undefined ? n > gt : n >= gte!;
    const belowHi = hi === undefined ? true : lt !== undefined ? n < lt : n <= lte!;
    const loS = lo === undefined ? '' : `${gt !== undefined ? 'greater than' : 'greater than or equal to'} ${show(lo)}`;
    const hiS = hi === undefined ? '' : `${lt !== undefined ? 'less than' : 'less than or equal to'} ${show(hi)}`;
    if (lo !== undefined && hi !== undefined && hi < lo) {
      if (!(aboveLo || belowHi)) this.err(at, 'pgv', `value must be ${loS} or ${hiS}`);
      return;
    }
    if (!(aboveLo && belowHi)) this.err(at, 'pgv', `value must be ${[loS, hiS].filter(Boolean).join(' and ')}`);
  }

  private stringRules(s: string, r: StringRules | undefined, at: string): void {
    if (!r) return;
    if (r.ignore_empty && s === '') return;
    const chars = [...s].length;
    const bytes = Buffer.byteLength(s);
    const fail = (m: string): void => this.err(at, 'pgv', m);
    if (r.const !== undefined && s !== r.const) fail(`value must equal ${JSON.stringify(r.const)}`);
    if (r.len !== undefined && chars !== Number(r.len)) fail(`value length must be ${r.len} characters`);
    if (r.min_len !== undefined && chars < Number(r.min_len)) fail(`value length must be at least ${r.min_len} characters`);
    if (r.max_len !== undefined && chars > Number(r.max_len)) fail(`value length must be at most ${r.max_len} characters`);
    if (r.len_bytes !== undefined && bytes !== Number(r.len_bytes)) fail(`value length must be ${r.len_bytes} bytes`);
    if (r.min_bytes !== undefined && bytes < Number(r.min_bytes)) fail(`value length must be at least ${r.min_bytes} bytes`);
    if (r.max_bytes !== undefined && bytes > Number(r.max_bytes)) fail(`value length must be at most ${r.max_bytes} bytes`);
    if (r.pattern !== undefined && !new RegExp(r.pattern, 'u').test(s)) fail(`value does not match regex pattern ${JSON.stringify(r.pattern)}`);
    if (r.prefix !== undefined && !s.startsWith(r.prefix)) fail(`value does not have prefix ${JSON.stringify(r.prefix)}`);
    if (r.suffix !== undefined && !s.endsWith(r.suffix)) fail(`value does not have suffix ${JSON.stringify(r.suffix)}`);
    if (r.contains !== undefined && !s.includes(r.contains)) fail(`value does not contain ${JSON.stringify(r.contains)}`);
    if (r.not_contains !== undefined && s.includes(r.not_contains)) fail(`value contains ${JSON.stringify(r.not_contains)}`);
    const inL = asList(r.in).map(String);
    if (inL.length && !inL.includes(s)) fail(`value must be in list ${JSON.stringify(inL)}`);
    if (asList(r.not_in).map(String).includes(s)) fail(`value must not be in list ${JSON.stringify(asList(r.not_in))}`);
    if (r.well_known_regex !== undefined) {
      const strict = r.strict !== false;
      const re = r.well_known_regex === 'HTTP_HEADER_NAME' ? (strict ? HEADER_NAME_STRICT : HEADER_LOOSE)
        : r.well_known_regex === 'HTTP_HEADER_VALUE' ? (strict ? HEADER_VALUE_STRICT : HEADER_LOOSE) : undefined;
      if (re && !re.test(s)) fail(`value does not match regex pattern for ${r.well_known_regex}${strict ? '' : ' (non-strict)'}`);
    }
    if (r.ipv4 && !IPV4.test(s)) fail('value must be a valid IPv4 address');
    if (r.ipv6 && !isIpv6(s)) fail('value must be a valid IPv6 address');
    if (r.ip && !IPV4.test(s) && !isIpv6(s)) fail('value must be a valid IP address');
    if (r.hostname && !HOSTNAME.test(s)) fail('value must be a valid hostname');
    if (r.address && !IPV4.test(s) && !isIpv6(s) && !HOSTNAME.test(s)) fail('value must be a valid hostname, or ip address');
    if (r.uri) {
      try {
        new URL(s);
      } catch {
        fail('value must be a valid URI');
      }
    }
  }

  /** Rules on message-typed fields that inspect the value (duration, any, timestamp). */
  private messageRules(full: string, v: unknown, rules: Rules, at: string): void {
    if (full === 'google.protobuf.Duration' && rules.duration && typeof v === 'string') {
      const ns = durationNs(v);
      if (ns === undefined) return;
      const d = rules.duration;
      const c = (x: unknown): bigint | undefined => (x === undefined ? undefined : pgvDurationNs(x));
      if (d.const !== undefined && ns !== pgvDurationNs(d.const)) this.err(at, 'pgv', 'value must equal the constant duration');
      const inL = asList(d.in).map(pgvDurationNs);
      if (inL.length && !inL.includes(ns)) this.err(at, 'pgv', 'value must be in the list of durations');
      if (asList(d.not_in).map(pgvDurationNs).includes(ns)) this.err(at, 'pgv', 'value must not be in the list of durations');
      const show = (x: bigint): string => `${Number(x) / 1e9}s`;
      this.range(ns, c(d.gt), c(d.gte), c(d.lt), c(d.lte), at, show);
    }
    if (full === 'google.protobuf.Any' && rules.any && isObj(v) && typeof v['@type'] === 'string') {
      const url = v['@type'];
      const inL = asList(rules.any.in).map(String);
      if (inL.length && !inL.includes(url)) this.err(at, 'pgv', `type URL must be in list ${JSON.stringify(inL)}`);
      if (asList(rules.any.not_in).map(String).includes(url)) this.err(at, 'pgv', `type URL must not be in list ${JSON.stringify(asList(rules.any.not_in))}`);
    }
    const w = WRAPPERS[full];
    if (w) {
      const parsed = w === 'string' ? v : w in INT_RANGES ? (typeof v === 'string' ? BigInt(v) : BigInt(v as number)) : v;
      if (typeof parsed !== 'undefined') this.scalarRules(w, parsed, rules, at);
    }
  }

  private wellKnown(full: string, v: unknown, at: string, partial: boolean): void {
    const w = WRAPPERS[full];
    if (w) {
      this.scalar(w, v, at, false);
      return;
    }
    switch (full) {
      case 'google.protobuf.Duration':
        if (typeof v !== 'string') return this.err(at, 'json', `expected a duration string like "1.5s", got ${kindOf(v)}`);
        if (durationNs(v) === undefined) this.err(at, 'json', `invalid duration ${JSON.stringify(v)} (seconds with up to 9 decimals and an "s" suffix, at most ${MAX_DURATION_S}s)`);
        return;
      case 'google.protobuf.Timestamp':
        if (typeof v !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$/.test(v)) this.err(at, 'json', 'expected an RFC 3339 timestamp');
        return;
      case 'google.protobuf.FieldMask':
        if (typeof v !== 'string') this.err(at, 'json', 'expected a field mask string');
        return;
      case 'google.protobuf.Struct':
        if (!isObj(v)) this.err(at, 'json', `expected an object (Struct), got ${kindOf(v)}`);
        return;
      case 'google.protobuf.ListValue':
        if (!Array.isArray(v)) this.err(at, 'json', `expected an array (ListValue), got ${kindOf(v)}`);
        return;
      case 'google.protobuf.Value':
        return;
      case 'google.protobuf.Any':
        this.any(v, at, partial);
        return;
    }
  }

  private any(v: unknown, at: string, partial: boolean): void {
    if (!isObj(v)) return this.err(at, 'json', `expected an object with "@type" (Any), got ${kindOf(v)}`);
    const url = v['@type'];
    if (typeof url !== 'string' || !url.includes('/')) {
      return this.err(at, 'any', '"@type" is required: a type URL such as type.googleapis.com/envoy.extensions.filters.http.router.v3.Router');
    }
    const name = url.slice(url.lastIndexOf('/') + 1);
    const t = lookupMessage(name);
    if (!t) return this.err(`${at}.@type`, 'any', `unknown type ${JSON.stringify(name)}: not in Envoy's API (as bundled, about Envoy 1.31)`);
    const { ['@type']: _t, ...rest } = v;
    if (SPECIAL_JSON.has(name)) {
      for (const k of Object.keys(rest)) if (k !== 'value') this.err(`${at}.${k}`, 'unknown-field', `unknown field "${k}" in Any of ${name} (only "value")`);
      if (rest.value === undefined) return;
      this.wellKnown(name, rest.value, `${at}.value`, partial);
      return;
    }
    if (TYPED_STRUCT.has(name)) {
      this.message(t, rest, at, partial);
      const inner = typeof rest.type_url === 'string' ? rest.type_url : undefined;
      if (inner) {
        const innerName = inner.slice(inner.lastIndexOf('/') + 1);
        const it = lookupMessage(innerName);
        if (!it) this.err(`${at}.type_url`, 'any', `unknown type ${JSON.stringify(innerName)}`);
        else this.message(it, rest.value ?? {}, `${at}.value`, partial);
      }
      return;
    }
    this.message(t, rest, at, partial);
  }
}

function isDefault(f: protobuf.Field, v: unknown): boolean {
  if (f.resolvedType || f.repeated || f.map || f.partOf) return false;
  return v === defaultOf(f.type) || (typeof v === 'number' && v === 0) || v === '0';
}

function defaultOf(type: string): unknown {
  if (type in INT_RANGES) return 0n;
  if (type === 'double' || type === 'float') return 0;
  if (type === 'bool') return false;
  if (type === 'bytes') return Buffer.alloc(0);
  return '';
}

interface NumRules { const?: unknown; lt?: unknown; lte?: unknown; gt?: unknown; gte?: unknown; in?: unknown; not_in?: unknown; ignore_empty?: boolean }
interface StringRules {
  const?: string; len?: number; min_len?: number; max_len?: number; len_bytes?: number; min_bytes?: number; max_bytes?: number;
  pattern?: string; prefix?: string; suffix?: string; contains?: string; not_contains?: string; in?: unknown; not_in?: unknown;
  well_known_regex?: string; strict?: boolean; ipv4?: boolean; ipv6?: boolean; ip?: boolean; hostname?: boolean; address?: boolean;
  uri?: boolean; ignore_empty?: boolean;
}
interface Rules {
  message?: { required?: boolean; skip?: boolean };
  string?: StringRules;
  bytes?: { min_len?: number; max_len?: number; len?: number };
  bool?: { const?: boolean };
  enum?: { defined_only?: boolean; const?: number; in?: unknown; not_in?: unknown };
  repeated?: { min_items?: number; max_items?: number; unique?: boolean; ignore_empty?: boolean; items?: Rules };
  map?: { min_pairs?: number; max_pairs?: number; keys?: Rules; values?: Rules };
  duration?: { required?: boolean; const?: unknown; lt?: unknown; lte?: unknown; gt?: unknown; gte?: unknown; in?: unknown; not_in?: unknown };
  timestamp?: { required?: boolean };
  any?: { required?: boolean; in?: unknown; not_in?: unknown };
  int32?: NumRules; int64?: NumRules; uint32?: NumRules; uint64?: NumRules; sint32?: NumRules; sint64?: NumRules;
  fixed32?: NumRules; fixed64?: NumRules; sfixed32?: NumRules; sfixed64?: NumRules; double?: NumRules; float?: NumRules;
}

/** The field's (validate.rules), merged from protobufjs' parsedOptions. */
function fieldRules(f: protobuf.Field): Rules | undefined {
  const po = (f as unknown as { parsedOptions?: Obj[] }).parsedOptions;
  if (!po) return undefined;
  let out: Rules | undefined;
  for (const o of po) {
    const r = o['(validate.rules)'];
    if (isObj(r)) out = { ...(out ?? {}), ...(r as Rules) };
  }
  return out;
}

// --- public API --------------------------------------------------------------------------------

/** Validates `value` (the JSON/YAML form) as the Envoy API message `typeName`. */
export function validateEnvoyMessage(typeName: string, value: unknown, opts: ValidateOptions = {}, at = ''): ValidationResult {
  const t = lookupMessage(typeName);
  const c = new Checker(opts);
  if (!t) c.err(at || '(root)', 'any', `unknown message type ${typeName}`);
  else c.message(t, value, at, opts.partial === true);
  return { ok: c.errors.length === 0, errors: c.errors, warnings: c.warnings };
}

export const BOOTSTRAP = 'envoy.config.bootstrap.v3.Bootstrap';

/** An Envoy bootstrap (envoy.yaml). */
export function validateBootstrap(doc: unknown, opts: ValidateOptions = {}): ValidationResult {
  return validateEnvoyMessage(BOOTSTRAP, doc, opts);
}

/** The message type an Istio EnvoyFilter patch `value` is, by its applyTo (Istio's EnvoyFilter API). */
export const ENVOY_FILTER_TYPES: Record<string, string> = {
  LISTENER: 'envoy.config.listener.v3.Listener',
  FILTER_CHAIN: 'envoy.config.listener.v3.FilterChain',
  NETWORK_FILTER: 'envoy.config.listener.v3.Filter',
  HTTP_FILTER: 'envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter',
  ROUTE_CONFIGURATION: 'envoy.config.route.v3.RouteConfiguration',
  VIRTUAL_HOST: 'envoy.config.route.v3.VirtualHost',
  HTTP_ROUTE: 'envoy.config.route.v3.Route',
  CLUSTER: 'envoy.config.cluster.v3.Cluster',
  EXTENSION_CONFIG: 'envoy.config.core.v3.TypedExtensionConfig',
  BOOTSTRAP: 'envoy.config.bootstrap.v3.Bootstrap',
  LISTENER_FILTER: 'envoy.config.listener.v3.ListenerFilter',
};

/**
 * Every patch `value` of an Istio EnvoyFilter (networking.istio.io) as the message its applyTo
 * implies. MERGE patches are partial (only present fields checked); REMOVE has no value.
 */
export function validateEnvoyFilter(ef: unknown, opts: ValidateOptions = {}): ValidationResult {
  const c: ValidationResult = { ok: true, errors: [], warnings: [] };
  const patches = isObj(ef) && isObj(ef.spec) && Array.isArray(ef.spec.configPatches) ? ef.spec.configPatches : undefined;
  if (!patches) {
    c.errors.push({ path: 'spec.configPatches', class: 'json', message: 'an EnvoyFilter with spec.configPatches is required' });
    return { ...c, ok: false };
  }
  patches.forEach((p, i) => {
    const at = `spec.configPatches[${i}]`;
    const applyTo = isObj(p) ? String(p.applyTo) : '';
    const type = ENVOY_FILTER_TYPES[applyTo];
    const patch = isObj(p) && isObj(p.patch) ? p.patch : undefined;
    const op = String(patch?.operation ?? '');
    if (!type) {
      c.errors.push({ path: `${at}.applyTo`, class: 'json', message: `unknown applyTo ${JSON.stringify(applyTo)} (one of ${Object.keys(ENVOY_FILTER_TYPES).join(', ')})` });
      return;
    }
    if (op === 'REMOVE') return;
    if (!patch || patch.value === undefined) {
      c.errors.push({ path: `${at}.patch.value`, class: 'json', message: `operation ${op || '(none)'} needs a value` });
      return;
    }
    const r = validateEnvoyMessage(type, patch.value, { ...opts, partial: opts.partial || op === 'MERGE' }, `${at}.patch.value`);
    c.errors.push(...r.errors);
    c.warnings.push(...r.warnings);
  });
  return { ...c, ok: c.errors.length === 0 };
}

/** One line per finding, for test messages and the CLI. */
export function formatFindings(r: ValidationResult): string {
  return [...r.errors.map((f) => `error ${f.path}: ${f.message} [${f.class}]`),
    ...r.warnings.map((f) => `warning ${f.path}: ${f.message} [${f.class}]`)].join('\n');
}

if (require.main === module) {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const YAML = require('yaml') as typeof import('yaml');
  let failed = false;
  for (const file of process.argv.slice(2)) {
    for (const doc of YAML.parseAllDocuments(readFileSync(file, 'utf8'))) {
      const v = doc.toJS() as unknown;
      const r = isObj(v) && v.kind === 'EnvoyFilter' ? validateEnvoyFilter(v) : validateBootstrap(v);
      console.log(`${file}: ${r.ok ? 'OK' : 'INVALID'}${r.warnings.length ? ` (${r.warnings.length} warnings)` : ''}`);
      if (r.errors.length || r.warnings.length) console.log(formatFindings(r));
      failed ||= !r.ok;
    }
  }
  process.exit(failed ? 1 : 0);
}
