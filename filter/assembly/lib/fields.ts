// Typed, path-aware access to a parsed JSON object. The first problem found is kept with the
// dotted path of the field (e.g. `link.services[0].peer: required`) so that an invalid plugin
// configuration is refused with a message that names the field.
import { JKind, JValue } from "./json";

export class Problems {
  first: string = "";
  get ok(): bool { return this.first.length == 0; }
  add(path: string, reason: string): void {
    if (this.first.length == 0) this.first = path + ": " + reason;
  }
}

/** How a key "" is shown in a path. */
export const EMPTY_KEY = "<empty key>";

export function join(base: string, key: string): string {
  return base.length == 0 ? key : base + "." + key;
}

export class ObjectReader {
  constructor(public v: JValue, public path: string, public problems: Problems, allowed: Array<string>) {
    for (let i = 0; i < v.keys.length; i++) {
      // A key "" is named, not left as a bare path (issue 24 #8: it read ": unknown field").
      if (!allowed.includes(v.keys[i])) problems.add(join(path, v.keys[i].length == 0 ? EMPTY_KEY : v.keys[i]), "unknown field");
    }
  }

  has(key: string): bool { return this.v.get(key) != null; }

  private field(key: string, kind: JKind, required: bool): JValue | null {
    const f = this.v.get(key);
    if (f == null) {
      if (required) this.problems.add(join(this.path, key), "required");
      return null;
    }
    if (f.kind != kind) {
      this.problems.add(join(this.path, key), "must be " + kindName(kind) + ", got " + f.kindName());
      return null;
    }
    return f;
  }

  str(key: string, def: string, required: bool = false): string {
    const f = this.field(key, JKind.Str, required);
    return f == null ? def : f.s;
  }

  int(key: string, def: i32, min: i32, max: i32, required: bool = false): i32 {
    const f = this.field(key, JKind.Num, required);
    if (f == null) return def;
    if (f.n != Math.floor(f.n)) { this.problems.add(join(this.path, key), "must be an integer"); return def; }
    if (f.n < <f64>min || f.n > <f64>max) {
      this.problems.add(join(this.path, key), "must be between " + min.toString() + " and " + max.toString());
      return def;
    }
    return <i32>f.n;
  }

  num(key: string, def: f64, min: f64, max: f64, required: bool = false): f64 {
    const f = this.field(key, JKind.Num, required);
    if (f == null) return def;
    if (f.n < min || f.n > max) {
      this.problems.add(join(this.path, key), "must be between " + min.toString() + " and " + max.toString());
      return def;
    }
    return f.n;
  }

  bool(key: string, def: bool): bool {
    const f = this.field(key, JKind.Bool, false);
    return f == null ? def : f.b;
  }

  oneOf(key: string, def: string, choices: Array<string>): string {
    const s = this.str(key, def);
    if (!choices.includes(s)) {
      this.problems.add(join(this.path, key), "must be one of " + choices.join(", ") + ", got \"" + s + "\"");
      return def;
    }
    return s;
  }

  obj(key: string, allowed: Array<string>, required: bool = false): ObjectReader | null {
    const f = this.field(key, JKind.Obj, required);
    return f == null ? null : new ObjectReader(f, join(this.path, key), this.problems, allowed);
  }

  arr(key: string, required: bool = false): Array<JValue> | null {
    const f = this.field(key, JKind.Arr, required);
    return f == null ? null : f.items;
  }
}

export function kindName(kind: JKind): string {
  const v = new JValue();
  v.kind = kind;
  return v.kindName();
}

/** Header names Envoy accepts from a filter: lowercase token characters, at most 128. */
export function isHeaderName(s: string): bool {
  if (s.length == 0 || s.length > 128) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x5f || c == 0x2e;
    if (!ok) return false;
  }
  return true;
}

// Headers that Envoy, HTTP itself, tracing or the mesh own, and credentials: a filter that set or
// stripped one of them would break framing, authentication, a client's trace context or Envoy's
// own routing (issue 24 #5: with `b3` as link.header a client's trace context reached the upstream
// as `b3: degraded`). One list for every header-name field of the configuration. Pseudo-headers
// are already refused by isHeaderName (no ':'). The ORCA response headers are the filter's own
// (stripped when inband.stripOrca), so no other field may name them either. Mirrored in
// filter/config.schema.json (definitions.headerName) and docs/contracts.md.
export const RESERVED_HEADERS: Array<string> = [
  // HTTP semantics and hop-by-hop
  "host", "origin", "content-length", "content-type", "transfer-encoding", "te", "trailer", "connection", "keep-alive",
  "proxy-connection", "upgrade", "expect", "forwarded", "via",
  // credentials
  "authorization", "proxy-authorization", "proxy-authenticate", "www-authenticate", "cookie", "set-cookie", "x-api-key",
  // tracing
  "x-request-id", "traceparent", "tracestate", "baggage", "b3", "grpc-trace-bin", "x-amzn-trace-id", "uber-trace-id",
  "x-ot-span-context", "x-cloud-trace-context", "x-client-trace-id",
  // gRPC, ORCA (the filter's own, read and stripped on responses)
  "grpc-timeout", "endpoint-load-metrics", "endpoint-load-metrics-bin",
];
export const RESERVED_PREFIXES: Array<string> = ["x-envoy-", "x-forwarded-", "x-istio-", "x-b3-", "x-datadog-", "sec-websocket-",
  "uberctx-", "ot-baggage-", "x-amz-"];

/** "" when `name` may be owned by the filter, else why not. */
export function reservedHeaderReason(name: string): string {
  for (let i = 0; i < RESERVED_HEADERS.length; i++) {
    if (name == RESERVED_HEADERS[i]) return "must not be " + name + " (a header Envoy, HTTP or the mesh owns)";
  }
  for (let i = 0; i < RESERVED_PREFIXES.length; i++) {
    if (name.startsWith(RESERVED_PREFIXES[i])) return "must not start with " + RESERVED_PREFIXES[i] + " (headers Envoy or the mesh own)";
  }
  return "";
}

/** Every character is in [A-Za-z0-9] or in `extra`. */
export function onlyChars(s: string, extra: string): bool {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39)) continue;
    if (extra.indexOf(String.fromCharCode(c)) < 0) return false;
  }
  return true;
}
