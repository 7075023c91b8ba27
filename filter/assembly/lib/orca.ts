// ORCA load reports carried on responses (pure): Envoy's `endpoint-load-metrics` header in the
// formats Envoy documents -- `TEXT k=v, ...`, `JSON {...}`, `BIN <base64>` -- and the binary
// header `endpoint-load-metrics-bin` (base64 of xds.data.orca.v3.OrcaLoadReport). docs/inband.md.
//
// Input comes from an upstream: every path is bounded (MAX_ORCA_BYTES, MAX_ORCA_ENTRIES) and
// returns a report with ok = false and a reason instead of trapping. Values that are not finite
// or negative are dropped (an ORCA utilisation may exceed 1; a negative one means nothing).
import { parseJson, JKind, JValue } from "./json";

/** Longer header values are refused: a load report is a few dozen bytes. */
export const MAX_ORCA_BYTES: i32 = 4096;
/** At most this many key/value entries (named metrics included) are read. */
export const MAX_ORCA_ENTRIES: i32 = 64;

export class OrcaReport {
  ok: bool = false;
  /** Why the value was refused (ok = false). */
  error: string = "";
  /** NaN = not reported. */
  appUtil: f64 = NaN;
  cpuUtil: f64 = NaN;
  memUtil: f64 = NaN;
  rps: f64 = NaN;
  eps: f64 = NaN;
  /** named_metrics[queueName] and named_metrics[kvName] (names from the configuration). */
  queue: f64 = NaN;
  kvCache: f64 = NaN;

  reset(): OrcaReport {
    this.ok = false; this.error = "";
    this.appUtil = NaN; this.cpuUtil = NaN; this.memUtil = NaN; this.rps = NaN; this.eps = NaN;
    this.queue = NaN; this.kvCache = NaN;
    return this;
  }

  /** The utilisation Envoy's client-side WRR uses: application_utilization if > 0, else cpu. */
  utilization(): f64 { return this.appUtil > 0 ? this.appUtil : this.cpuUtil; }
}

@inline function usable(v: f64): bool { return v - v == 0 && v >= 0; }

function fail(r: OrcaReport, why: string): OrcaReport { r.ok = false; r.error = why; return r; }

/** Stores one key/value; keys outside the report are ignored (ORCA reports may grow). */
function put(r: OrcaReport, key: string, v: f64, queueName: string, kvName: string): void {
  if (!usable(v)) return;
  if (key == "application_utilization") r.appUtil = v;
  else if (key == "cpu_utilization") r.cpuUtil = v;
  else if (key == "mem_utilization") r.memUtil = v;
  else if (key == "rps_fractional") r.rps = v;
  else if (key == "eps") r.eps = v;
  else if (key.startsWith("named_metrics.")) putNamed(r, key.substr(14), v, queueName, kvName);
}

function putNamed(r: OrcaReport, name: string, v: f64, queueName: string, kvName: string): void {
  if (!usable(v)) return;
  if (name == queueName) r.queue = v;
  else if (name == kvName) r.kvCache = v;
}

@inline function isSpace(c: i32): bool { return c == 0x20 || c == 0x09; }

/**
 * Parses the value of `endpoint-load-metrics` (TEXT / JSON / BIN prefixes) into `r` (reset
 * first). queueName / kvName: the named metrics read as queue length and KV-cache use.
 */
export function parseOrcaHeader(value: string, queueName: string, kvName: string, r: OrcaReport): OrcaReport {
  r.reset();
  if (value.length > MAX_ORCA_BYTES) return fail(r, "longer than " + MAX_ORCA_BYTES.toString() + " bytes");
  let i = 0;
  while (i < value.length && isSpace(value.charCodeAt(i))) i++;
  const rest = value.substr(i);
  if (rest.startsWith("TEXT ")) return parseText(rest.substr(5), queueName, kvName, r);
  if (rest.startsWith("JSON ")) return parseJsonReport(rest.substr(5), queueName, kvName, r);
  if (rest.startsWith("BIN ")) return parseOrcaBinary(rest.substr(4), queueName, kvName, r);
  return fail(r, "no TEXT, JSON or BIN prefix");
}

/** TEXT: `key=value` pairs separated by commas (blanks around them allowed). */
function parseText(s: string, queueName: string, kvName: string, r: OrcaReport): OrcaReport {
  let entries = 0;
  let start = 0;
  const n = s.length;
  while (start <= n) {
    let end = s.indexOf(",", start);
    if (end < 0) end = n;
    const item = s.substring(start, end).trim();
    start = end + 1;
    if (item.length == 0) { if (end == n) break; return fail(r, "empty entry"); }
    if (++entries > MAX_ORCA_ENTRIES) return fail(r, "more than " + MAX_ORCA_ENTRIES.toString() + " entries");
    const eq = item.indexOf("=");
    if (eq <= 0) return fail(r, "entry without key=value: " + item);
    const key = item.substring(0, eq).trim();
    const v = parseNumber(item.substring(eq + 1).trim());
    if (isNaN(v)) return fail(r, "value of " + key + " is not a number");
    put(r, key, v, queueName, kvName);
  }
  if (entries == 0) return fail(r, "no entries");
  r.ok = true;
  return r;
}

/** A decimal number (sign, digits, fraction, exponent) or NaN; nothing else is accepted. */
export function parseNumber(s: string): f64 {
  const n = s.length;
  if (n == 0 || n > 40) return NaN;
  let i = 0;
  let c = s.charCodeAt(0);
  if (c == 0x2d || c == 0x2b) i++;
  let digits = 0;
  while (i < n && (c = s.charCodeAt(i)) >= 0x30 && c <= 0x39) { i++; digits++; }
  if (i < n && s.charCodeAt(i) == 0x2e) {
    i++;
    while (i < n && (c = s.charCodeAt(i)) >= 0x30 && c <= 0x39) { i++; digits++; }
  }
  if (digits == 0) return NaN;
  if (i < n && (s.charCodeAt(i) | 0x20) == 0x65) {
    i++;
    if (i < n && ((c = s.charCodeAt(i)) == 0x2d || c == 0x2b)) i++;
    let ed = 0;
    while (i < n && (c = s.charCodeAt(i)) >= 0x30 && c <= 0x39) { i++; ed++; }
    if (ed == 0) return NaN;
  }
  if (i != n) return NaN;
  return parseFloat(s);
}

/** JSON: the OrcaLoadReport's proto3 JSON mapping (camelCase or original field names). */
function parseJsonReport(s: string, queueName: string, kvName: string, r: OrcaReport): OrcaReport {
  const res = parseJson(s);
  if (res.value == null) return fail(r, "invalid JSON: " + res.error);
  const o = res.value!;
  if (o.kind != JKind.Obj) return fail(r, "JSON report must be an object");
  if (o.keys.length > MAX_ORCA_ENTRIES) return fail(r, "more than " + MAX_ORCA_ENTRIES.toString() + " entries");
  for (let k = 0; k < o.keys.length; k++) {
    const key = snake(o.keys[k]);
    const v = o.items[k];
    if (key == "named_metrics") {
      if (v.kind != JKind.Obj) return fail(r, "named_metrics must be an object");
      if (v.keys.length > MAX_ORCA_ENTRIES) return fail(r, "more than " + MAX_ORCA_ENTRIES.toString() + " named metrics");
      for (let m = 0; m < v.keys.length; m++) {
        const nv = v.items[m];
        if (nv.kind == JKind.Num) putNamed(r, v.keys[m], nv.n, queueName, kvName);
      }
      continue;
    }
    const num = jsonNumber(v);
    if (!isNaN(num)) put(r, key, num, queueName, kvName);
  }
  r.ok = true;
  return r;
}

/** proto3 JSON writes doubles as numbers, and uint64 (the deprecated rps) as a string. */
function jsonNumber(v: JValue): f64 {
  if (v.kind == JKind.Num) return v.n;
  if (v.kind == JKind.Str) return parseNumber(v.s);
  return NaN;
}

/** camelCase → snake_case for the known keys (applicationUtilization → application_utilization). */
function snake(k: string): string {
  if (k == "applicationUtilization") return "application_utilization";
  if (k == "cpuUtilization") return "cpu_utilization";
  if (k == "memUtilization") return "mem_utilization";
  if (k == "rpsFractional") return "rps_fractional";
  if (k == "namedMetrics") return "named_metrics";
  return k;
}

// ---------------------------------------------------------------- binary

/** 0-63 for a base64 (standard or URL-safe) character, -1 otherwise. */
function b64(c: i32): i32 {
  if (c >= 0x41 && c <= 0x5a) return c - 0x41;
  if (c >= 0x61 && c <= 0x7a) return c - 0x61 + 26;
  if (c >= 0x30 && c <= 0x39) return c - 0x30 + 52;
  if (c == 0x2b || c == 0x2d) return 62;
  if (c == 0x2f || c == 0x5f) return 63;
  return -1;
}

/** Base64 (padding optional) → bytes, or null when a character is not base64. */
export function decodeBase64(s: string): Uint8Array | null {
  let n = s.length;
  while (n > 0 && s.charCodeAt(n - 1) == 0x3d) n--;
  if (n % 4 == 1) return null;
  const out = new Uint8Array((n * 3) >> 2);
  let acc: u32 = 0, bits = 0, o = 0;
  for (let i = 0; i < n; i++) {
    const v = b64(s.charCodeAt(i));
    if (v < 0) return null;
    acc = (acc << 6) | <u32>v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (o < out.length) out[o++] = <u8>((acc >> bits) & 0xff);
    }
  }
  return out;
}

/** `endpoint-load-metrics-bin` (or the BIN format): base64 of a serialized OrcaLoadReport. */
export function parseOrcaBinary(value: string, queueName: string, kvName: string, r: OrcaReport): OrcaReport {
  r.reset();
  const s = value.trim();
  if (s.length > MAX_ORCA_BYTES) return fail(r, "longer than " + MAX_ORCA_BYTES.toString() + " bytes");
  const bytes = decodeBase64(s);
  if (bytes == null) return fail(r, "not base64");
  return decodeOrcaProto(changetype<Uint8Array>(bytes), queueName, kvName, r);
}

/** Protobuf cursor over a byte range: every read checks the bound and sets `bad` instead of trapping. */
class Cursor {
  bad: bool = false;
  constructor(public b: Uint8Array, public pos: i32, public end: i32) {}
  varint(): u64 {
    let v: u64 = 0;
    for (let shift: u64 = 0; shift < 64; shift += 7) {
      if (this.pos >= this.end) { this.bad = true; return 0; }
      const c = <u64>unchecked(this.b[this.pos++]);
      v |= (c & 0x7f) << shift;
      if ((c & 0x80) == 0) return v;
    }
    this.bad = true;
    return 0;
  }
  double(): f64 {
    if (this.end - this.pos < 8) { this.bad = true; this.pos = this.end; return NaN; }
    let v: u64 = 0;
    for (let k = 7; k >= 0; k--) v = (v << 8) | <u64>unchecked(this.b[this.pos + k]);
    this.pos += 8;
    return reinterpret<f64>(v);
  }
  /** Skips a field of wire type `wt`; false on an unknown type or a short buffer. */
  skip(wt: i32): bool {
    if (wt == 0) { this.varint(); return !this.bad; }
    if (wt == 1) { if (this.end - this.pos < 8) return false; this.pos += 8; return true; }
    if (wt == 5) { if (this.end - this.pos < 4) return false; this.pos += 4; return true; }
    if (wt == 2) {
      const len = this.varint();
      if (this.bad || len > <u64>(this.end - this.pos)) return false;
      this.pos += <i32>len;
      return true;
    }
    return false;
  }
}

/**
 * xds.data.orca.v3.OrcaLoadReport fields read: 1 cpu_utilization, 2 mem_utilization (double),
 * 3 rps (uint64, deprecated: used when rps_fractional is absent), 6 rps_fractional, 7 eps,
 * 9 application_utilization (double), 8 named_metrics (map<string, double>). Others are skipped.
 */
export function decodeOrcaProto(b: Uint8Array, queueName: string, kvName: string, r: OrcaReport): OrcaReport {
  const c = new Cursor(b, 0, b.length);
  let entries = 0;
  let rpsInt: f64 = NaN;
  while (c.pos < c.end) {
    const tag = c.varint();
    if (c.bad) return fail(r, "truncated tag");
    const field = <i32>(tag >> 3);
    const wt = <i32>(tag & 7);
    if (++entries > MAX_ORCA_ENTRIES * 4) return fail(r, "too many fields");
    if (wt == 1 && (field == 1 || field == 2 || field == 6 || field == 7 || field == 9)) {
      const v = c.double();
      if (c.bad) return fail(r, "truncated double in field " + field.toString());
      const key = field == 1 ? "cpu_utilization" : field == 2 ? "mem_utilization" : field == 6 ? "rps_fractional" : field == 7 ? "eps" : "application_utilization";
      put(r, key, v, queueName, kvName);
    } else if (wt == 0 && field == 3) {
      const v = c.varint();
      if (c.bad) return fail(r, "truncated rps");
      rpsInt = <f64>v;
    } else if (wt == 2 && field == 8) {
      const len = c.varint();
      if (c.bad || len > <u64>(c.end - c.pos)) return fail(r, "truncated named_metrics entry");
      const end = c.pos + <i32>len;
      if (!mapEntry(c, end, queueName, kvName, r)) return fail(r, "malformed named_metrics entry");
      c.pos = end;
    } else if (!c.skip(wt)) {
      return fail(r, "malformed field " + field.toString() + " (wire type " + wt.toString() + ")");
    }
  }
  if (isNaN(r.rps) && usable(rpsInt)) r.rps = rpsInt;
  r.ok = true;
  return r;
}

/** A map<string, double> entry: 1 key (string), 2 value (double), within [c.pos, end). */
function mapEntry(c: Cursor, end: i32, queueName: string, kvName: string, r: OrcaReport): bool {
  const e = new Cursor(c.b, c.pos, end);
  let key = "";
  let v: f64 = NaN;
  while (e.pos < e.end) {
    const tag = e.varint();
    if (e.bad) return false;
    const field = <i32>(tag >> 3);
    const wt = <i32>(tag & 7);
    if (field == 1 && wt == 2) {
      const len = e.varint();
      if (e.bad || len > <u64>(e.end - e.pos) || len > 256) return false;
      key = String.UTF8.decodeUnsafe(e.b.dataStart + <usize>e.pos, <usize>len);
      e.pos += <i32>len;
    } else if (field == 2 && wt == 1) {
      v = e.double();
      if (e.bad) return false;
    } else if (!e.skip(wt)) {
      return false;
    }
  }
  if (key.length > 0) putNamed(r, key, v, queueName, kvName);
  return true;
}
