// Thin wrappers over the raw Proxy-Wasm imports. The SDK's own helpers for shared data, metrics,
// queues and the plugin configuration do not match the ABI (wrong pointer/size arguments), so
// everything that returns data goes through these instead. Values the host returns are
// allocated through our exported `malloc` (pinned); take() adopts and unpins them.
import * as imports from "@solo-io/proxy-runtime/assembly/imports";
import { SCRATCH, armScratch, disarmScratch } from "./scratch";

export const OK: u32 = 0;
export const NOT_FOUND: u32 = 1;
export const CAS_MISMATCH: u32 = 8;

export const MAP_REQUEST_HEADERS: u32 = 0;
export const MAP_RESPONSE_HEADERS: u32 = 2;
export const MAP_HTTP_CALL_RESPONSE_HEADERS: u32 = 6;
export const BUFFER_HTTP_CALL_RESPONSE_BODY: u32 = 4;
export const BUFFER_PLUGIN_CONFIGURATION: u32 = 7;

export const METRIC_COUNTER: u32 = 0;
export const METRIC_GAUGE: u32 = 1;
export const METRIC_HISTOGRAM: u32 = 2;

export const LOG_TRACE: u32 = 0;
export const LOG_DEBUG: u32 = 1;
export const LOG_INFO: u32 = 2;
export const LOG_WARN: u32 = 3;
export const LOG_ERROR: u32 = 4;

// Out-parameter slots in static memory: no allocation per call.
const OUT_PTR: usize = memory.data(8);
const OUT_SIZE: usize = memory.data(8);
const OUT_U32: usize = memory.data(8);
const OUT_U64: usize = memory.data(8);

function resetOut(): void {
  store<usize>(OUT_PTR, 0);
  store<usize>(OUT_SIZE, 0);
}

/** Adopts the buffer the host wrote into OUT_PTR/OUT_SIZE. */
function take(): ArrayBuffer {
  const ptr = load<usize>(OUT_PTR);
  if (ptr == 0) return new ArrayBuffer(0);
  const buf = changetype<ArrayBuffer>(ptr);
  __unpin(ptr);
  return buf;
}

export function log(level: u32, msg: string): void {
  const b = String.UTF8.encode(msg);
  imports.proxy_log(level, changetype<usize>(b), b.byteLength);
}

export function nowNanos(): u64 {
  store<u64>(OUT_U64, 0);
  imports.proxy_get_current_time_nanoseconds(OUT_U64);
  return load<u64>(OUT_U64);
}

export function nowMs(): u64 { return nowNanos() / 1000000; }

export function setTickPeriod(ms: u32): u32 { return imports.proxy_set_tick_period_milliseconds(ms); }

/** Reads a whole buffer (plugin configuration, http call body, …). */
export function readBuffer(type: u32, size: u32): ArrayBuffer | null {
  if (size == 0) return new ArrayBuffer(0);
  resetOut();
  const r = imports.proxy_get_buffer_bytes(type, 0, size, OUT_PTR, OUT_SIZE);
  if (r != OK) return null;
  return take();
}

/** Plugin configuration of `size` bytes, as UTF-8 text ("" on failure). */
export function readPluginConfiguration(size: u32): string {
  const b = readBuffer(BUFFER_PLUGIN_CONFIGURATION, size);
  return b == null ? "" : String.UTF8.decode(b);
}

export class SharedValue {
  status: u32 = NOT_FOUND;
  value: ArrayBuffer = new ArrayBuffer(0);
  cas: u32 = 0;
  get found(): bool { return this.status == OK; }
}

export function getSharedData(key: ArrayBuffer): SharedValue {
  resetOut();
  store<u32>(OUT_U32, 0);
  const r = imports.proxy_get_shared_data(changetype<usize>(key), key.byteLength, OUT_PTR, OUT_SIZE, OUT_U32);
  const v = new SharedValue();
  v.status = r;
  if (r == OK) {
    v.value = take();
    v.cas = load<u32>(OUT_U32);
  }
  return v;
}

/** Sets a value; with cas != 0 the host refuses (CAS_MISMATCH) if someone wrote since. */
export function setSharedData(key: ArrayBuffer, value: ArrayBuffer, cas: u32): u32 {
  return imports.proxy_set_shared_data(changetype<usize>(key), key.byteLength, changetype<usize>(value), value.byteLength, cas);
}

export function getHeader(map: u32, key: ArrayBuffer): ArrayBuffer | null {
  resetOut();
  const r = imports.proxy_get_header_map_value(map, changetype<usize>(key), key.byteLength, OUT_PTR, OUT_SIZE);
  if (r != OK) return null;
  return take();
}

/**
 * A header value read only to be looked at: `len` bytes at `ptr` (in the scratch area, so valid
 * until the next peek, or in `buf` when longer than the scratch area). No object is allocated for
 * a value that fits: the host's malloc call lands in the scratch area (abi/scratch.ts).
 */
export class Peek {
  ptr: usize = 0;
  len: i32 = 0;
  /** Keeps a value too long for the scratch area alive. */
  buf: ArrayBuffer | null = null;
}

/** proxy_get_header_map_value into `out`; false when the header is absent (or the host refused). */
export function peekHeader(map: u32, key: ArrayBuffer, out: Peek): bool {
  resetOut();
  armScratch();
  const r = imports.proxy_get_header_map_value(map, changetype<usize>(key), key.byteLength, OUT_PTR, OUT_SIZE);
  disarmScratch();
  if (r != OK) return false;
  const ptr = load<usize>(OUT_PTR);
  out.len = <i32>load<usize>(OUT_SIZE);
  if (ptr == SCRATCH || ptr == 0) {
    out.ptr = ptr;
    out.buf = null;
  } else {
    const b = take();
    out.buf = b;
    out.ptr = changetype<usize>(b);
  }
  return true;
}

export function replaceHeader(map: u32, key: ArrayBuffer, value: ArrayBuffer): u32 {
  return imports.proxy_replace_header_map_value(map, changetype<usize>(key), key.byteLength, changetype<usize>(value), value.byteLength);
}

// Declared here: the SDK binds its setter to proxy_get_buffer_status.
@external("env", "proxy_set_buffer_bytes")
declare function proxy_set_buffer_bytes(type: u32, start: u32, length: u32, data: usize, size: usize): u32;

/** Replaces bytes [start, start + length) of a buffer (start 0, length = size: the whole body) with `data`. */
export function setBuffer(type: u32, start: u32, length: u32, data: ArrayBuffer): u32 {
  return proxy_set_buffer_bytes(type, start, length, changetype<usize>(data), data.byteLength);
}

export function removeHeader(map: u32, key: ArrayBuffer): u32 {
  return imports.proxy_remove_header_map_value(map, changetype<usize>(key), key.byteLength);
}

export function defineMetric(type: u32, name: string): u32 {
  const b = String.UTF8.encode(name);
  store<u32>(OUT_U32, 0);
  const r = imports.proxy_define_metric(type, changetype<usize>(b), b.byteLength, OUT_U32);
  if (r != OK) {
    log(LOG_ERROR, "switchyard: cannot define metric " + name + " (result " + r.toString() + ")");
    return 0xffffffff;
  }
  return load<u32>(OUT_U32);
}

export function incrementMetric(id: u32, by: i64): void {
  if (id != 0xffffffff) imports.proxy_increment_metric(id, by);
}

export function recordMetric(id: u32, value: u64): void {
  if (id != 0xffffffff) imports.proxy_record_metric(id, value);
}

/** Current value of a metric, or u64.MAX_VALUE when the host refuses. */
export function getMetric(id: u32): u64 {
  store<u64>(OUT_U64, 0);
  const r = imports.proxy_get_metric(id, OUT_U64);
  return r == OK ? load<u64>(OUT_U64) : u64.MAX_VALUE;
}

/** Serializes header pairs in the Proxy-Wasm map format. */
export function serializePairs(keys: Array<string>, values: Array<string>): ArrayBuffer {
  const n = keys.length;
  const kb = new Array<ArrayBuffer>(n);
  const vb = new Array<ArrayBuffer>(n);
  let size = 4 + 8 * n;
  for (let i = 0; i < n; i++) {
    kb[i] = String.UTF8.encode(keys[i]);
    vb[i] = String.UTF8.encode(values[i]);
    size += kb[i].byteLength + vb[i].byteLength + 2;
  }
  const out = new ArrayBuffer(size);
  const p = changetype<usize>(out);
  store<u32>(p, n);
  let off: usize = 4 + 8 * <usize>n;
  for (let i = 0; i < n; i++) {
    store<u32>(p + 4 + 8 * <usize>i, kb[i].byteLength);
    store<u32>(p + 8 + 8 * <usize>i, vb[i].byteLength);
  }
  for (let i = 0; i < n; i++) {
    memory.copy(p + off, changetype<usize>(kb[i]), kb[i].byteLength);
    off += <usize>kb[i].byteLength + 1; // the byte after is the zero terminator (zeroed by new)
    memory.copy(p + off, changetype<usize>(vb[i]), vb[i].byteLength);
    off += <usize>vb[i].byteLength + 1;
  }
  return out;
}

export class HttpCallResult {
  status: u32 = 0;
  token: u32 = 0;
}

export function httpCall(cluster: string, headers: ArrayBuffer, timeoutMs: u32, body: ArrayBuffer | null = null): HttpCallResult {
  const c = String.UTF8.encode(cluster);
  const empty = body != null ? body! : new ArrayBuffer(0);
  const trailers = serializePairs([], []);
  store<u32>(OUT_U32, 0);
  const res = new HttpCallResult();
  res.status = imports.proxy_http_call(changetype<usize>(c), c.byteLength, changetype<usize>(headers), headers.byteLength,
    changetype<usize>(empty), empty.byteLength, changetype<usize>(trailers), trailers.byteLength, timeoutMs, OUT_U32);
  res.token = load<u32>(OUT_U32);
  return res;
}
