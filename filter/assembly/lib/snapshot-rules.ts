// The meaning of every number and address in a snapshot (docs/contracts.md, "Snapshot values"),
// the filter's copy of agent/src/snapshot/rules.ts. Both are held to the same golden fixtures
// (test/fixtures/snapshot/), decoded by filter/__tests__/snapshot-fixtures.spec.ts and
// test/agent/snapshot-fixtures.test.ts.

export const F32_MIN_NORMAL: f64 = 1.1754943508222875e-38;
export const MAX_MS: f64 = 3600000;

export const VALUE_OK: i32 = 0;
export const VALUE_UNKNOWN: i32 = 1; // NaN where the field allows "unknown"
export const VALUE_INVALID: i32 = 2;

/** Judges an f32 wire value against [min, max]; denormals are out of range everywhere. */
export function judge(v: f32, min: f64, max: f64, nanIsUnknown: bool): i32 {
  if (v != v) return nanIsUnknown ? VALUE_UNKNOWN : VALUE_INVALID;
  const d = <f64>v;
  if (d != 0 && Math.abs(d) < F32_MIN_NORMAL) return VALUE_INVALID;
  return d >= min && d <= max ? VALUE_OK : VALUE_INVALID;
}

export function rhoOk(v: f32): bool { return judge(v, 0, 1000, false) == VALUE_OK; }
export function esMsOk(v: f32): bool { return judge(v, 0.001, MAX_MS, false) == VALUE_OK; }
export function es2Ms2Ok(v: f32): bool { return judge(v, 1e-6, MAX_MS * MAX_MS, false) == VALUE_OK; }
export function lambdaOk(v: f32): bool { return judge(v, 0, 1e6, false) == VALUE_OK; }
export function queueOk(v: f32): bool { return judge(v, 0, 1e6, false) == VALUE_OK; }
/** p50Ms, p99Ms, baselineP99Ms: NaN is "unknown" and allowed. */
export function latencyOk(v: f32): bool { return judge(v, 0, MAX_MS, true) != VALUE_INVALID; }
export function gpuUtilOk(v: f32): bool { return judge(v, 0, 1, true) != VALUE_INVALID; }
export function slotsOk(v: f32): bool { return judge(v, 1, 65535, false) == VALUE_OK; }

/** A peer RTT as the filter uses it: the value when in [0, MAX_MS], NaN ("no usable sample") otherwise. */
export function normalizeRtt(v: f32): f32 {
  return judge(v, 0, MAX_MS, true) == VALUE_OK ? v : NaN;
}

// ---------------------------------------------------------------- UTF-8

/** Strict UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF) of n bytes at p. */
export function isValidUtf8(p: usize, n: i32): bool {
  let i = 0;
  while (i < n) {
    const b0 = <u32>load<u8>(p + <usize>i);
    if (b0 < 0x80) { i++; continue; }
    let need = 0;
    let lo: u32 = 0x80, hi: u32 = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) need = 1;
    else if (b0 == 0xe0) { need = 2; lo = 0xa0; }
    else if (b0 == 0xed) { need = 2; hi = 0x9f; }
    else if (b0 >= 0xe1 && b0 <= 0xef) need = 2;
    else if (b0 == 0xf0) { need = 3; lo = 0x90; }
    else if (b0 >= 0xf1 && b0 <= 0xf3) need = 3;
    else if (b0 == 0xf4) { need = 3; hi = 0x8f; }
    else return false;
    if (i + need >= n) return false; // truncated sequence
    const b1 = <u32>load<u8>(p + <usize>(i + 1));
    if (b1 < lo || b1 > hi) return false;
    for (let k = 2; k <= need; k++) {
      const b = <u32>load<u8>(p + <usize>(i + k));
      if (b < 0x80 || b > 0xbf) return false;
    }
    i += need + 1;
  }
  return true;
}

// ---------------------------------------------------------------- addresses

function isDecimal(s: string, from: i32, to: i32, maxLen: i32): bool {
  const n = to - from;
  if (n <= 0 || n > maxLen) return false;
  if (n > 1 && s.charCodeAt(from) == 48) return false; // no leading zeros
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

function decimalValue(s: string, from: i32, to: i32): i32 {
  let v = 0;
  for (let i = from; i < to; i++) v = v * 10 + (s.charCodeAt(i) - 48);
  return v;
}

/** Dotted quad in s[from, to). */
export function isIPv4(s: string, from: i32, to: i32): bool {
  let parts = 0;
  let start = from;
  for (let i = from; i <= to; i++) {
    if (i == to || s.charCodeAt(i) == 46) {
      if (!isDecimal(s, start, i, 3) || decimalValue(s, start, i) > 255) return false;
      parts++;
      start = i + 1;
    }
  }
  return parts == 4;
}

function isHex(c: i32): bool {
  return (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
}

/** IPv6 text form in s[from, to) without zone id: hex groups, at most one "::", optional dotted-quad tail. */
export function isIPv6(s: string, from: i32, to: i32): bool {
  const n = to - from;
  if (n < 2 || n > 45) return false;
  let units = 0;
  let gap = false;
  let i = from;
  if (s.charCodeAt(i) == 58) { // leading "::"
    if (s.charCodeAt(i + 1) != 58) return false;
    gap = true;
    i += 2;
    if (i == to) return true;
  }
  while (i < to) {
    let j = i;
    while (j < to && s.charCodeAt(j) != 58) j++;
    // group s[i, j)
    let dotted = false;
    for (let k = i; k < j; k++) if (s.charCodeAt(k) == 46) { dotted = true; break; }
    if (dotted) {
      if (j != to || !isIPv4(s, i, j)) return false;
      units += 2;
    } else {
      if (j - i < 1 || j - i > 4) return false;
      for (let k = i; k < j; k++) if (!isHex(s.charCodeAt(k))) return false;
      units += 1;
    }
    if (j == to) break;
    // s[j] == ':'
    if (j + 1 < to && s.charCodeAt(j + 1) == 58) {
      if (gap) return false;
      gap = true;
      i = j + 2;
      if (i == to) break;
    } else {
      i = j + 1;
      if (i == to) return false; // trailing single ':'
    }
  }
  return gap ? units <= 7 : units == 8;
}

/** "a.b.c.d:port" or "[ipv6]:port", port 1..65535 without leading zeros: what x-switchyard-endpoint may carry. */
export function isEndpointAddress(s: string): bool {
  const n = s.length;
  let colon = -1;
  for (let i = n - 1; i >= 0; i--) if (s.charCodeAt(i) == 58) { colon = i; break; }
  if (colon <= 0) return false;
  if (!isDecimal(s, colon + 1, n, 5)) return false;
  const port = decimalValue(s, colon + 1, n);
  if (port < 1 || port > 65535) return false;
  if (s.charCodeAt(0) == 91) { // '['
    return colon >= 2 && s.charCodeAt(colon - 1) == 93 && isIPv6(s, 1, colon - 1);
  }
  return isIPv4(s, 0, colon);
}
