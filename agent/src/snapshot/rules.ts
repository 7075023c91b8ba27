// The meaning of every number and address in a snapshot (docs/contracts.md, "Snapshot values"):
// one table, applied by the agent's encoder before it writes and by its decoder (the test oracle)
// after it reads. The filter applies the same table (filter/assembly/lib/snapshot-rules.ts); the
// golden fixtures in test/fixtures/snapshot/ hold both to it.
//
// Values are judged as f32, the width they have on the wire: a double that rounds to an f32
// denormal or to infinity is judged by what the filter would read.

/** f32 denormals (0 < |v| < 2^-126) are out of range for every field: no measurement is that small. */
export const F32_MIN_NORMAL = 1.1754943508222875e-38;
export const MAX_MS = 3_600_000;

export interface NumberRule {
  field: InstanceNumberField;
  min: number;
  max: number;
  /** NaN means "unknown" (kept, the instance stays healthy) instead of invalid */
  nanIsUnknown: boolean;
}

export type InstanceNumberField =
  | 'rho' | 'esMs' | 'es2Ms2' | 'lambdaPerS' | 'queueDepth' | 'p50Ms' | 'p99Ms' | 'baselineP99Ms' | 'gpuUtil' | 'slots';

/** Wire order of the f32 fields of an INSTANCES record (slots comes after the u32 dataAgeMs). */
export const INSTANCE_NUMBER_RULES: readonly NumberRule[] = [
  { field: 'rho', min: 0, max: 1000, nanIsUnknown: false },
  { field: 'esMs', min: 0.001, max: MAX_MS, nanIsUnknown: false },
  { field: 'es2Ms2', min: 1e-6, max: MAX_MS * MAX_MS, nanIsUnknown: false },
  { field: 'lambdaPerS', min: 0, max: 1e6, nanIsUnknown: false },
  { field: 'queueDepth', min: 0, max: 1e6, nanIsUnknown: false },
  { field: 'p50Ms', min: 0, max: MAX_MS, nanIsUnknown: true },
  { field: 'p99Ms', min: 0, max: MAX_MS, nanIsUnknown: true },
  { field: 'baselineP99Ms', min: 0, max: MAX_MS, nanIsUnknown: true },
  { field: 'gpuUtil', min: 0, max: 1, nanIsUnknown: true },
  { field: 'slots', min: 1, max: 65535, nanIsUnknown: false },
];

/** Peer RTTs: a value outside [0, MAX_MS] (or NaN, ±Inf, a denormal) means "no usable sample" and is carried as NaN. */
export const RTT_MIN = 0;
export const RTT_MAX = MAX_MS;

/** Whether v (judged as f32) satisfies the rule: 'ok', 'unknown' (NaN where allowed) or 'invalid'. */
export function judge(v: number, rule: { min: number; max: number; nanIsUnknown: boolean }): 'ok' | 'unknown' | 'invalid' {
  const f = Math.fround(v);
  if (Number.isNaN(f)) return rule.nanIsUnknown ? 'unknown' : 'invalid';
  if (f !== 0 && Math.abs(f) < F32_MIN_NORMAL) return 'invalid';
  return f >= rule.min && f <= rule.max ? 'ok' : 'invalid';
}

/** A peer RTT as the filter will use it: the f32 value when valid, NaN otherwise. */
export function normalizeRtt(v: number): number {
  // Stryker disable next-line BooleanLiteral: equivalent, NaN is neither 'ok' when unknown nor when invalid: NaN either way
  return judge(v, { min: RTT_MIN, max: RTT_MAX, nanIsUnknown: true }) === 'ok' ? v : NaN;
}

export const SLOTS_RULE = INSTANCE_NUMBER_RULES[INSTANCE_NUMBER_RULES.length - 1];

const [RHO, ES, ES2, LAMBDA, QUEUE, P50, P99, BASELINE, GPU] = INSTANCE_NUMBER_RULES;

/** First invalid number field of a record (slots given apart: it is optional on input), or undefined. */
export function firstInvalidNumber(r: Record<Exclude<InstanceNumberField, 'slots'>, number>, slots: number): InstanceNumberField | undefined {
  // written out field by field: this runs per instance on every publish and decode
  if (judge(r.rho, RHO) === 'invalid') return 'rho';
  if (judge(r.esMs, ES) === 'invalid') return 'esMs';
  if (judge(r.es2Ms2, ES2) === 'invalid') return 'es2Ms2';
  if (judge(r.lambdaPerS, LAMBDA) === 'invalid') return 'lambdaPerS';
  if (judge(r.queueDepth, QUEUE) === 'invalid') return 'queueDepth';
  if (judge(r.p50Ms, P50) === 'invalid') return 'p50Ms';
  if (judge(r.p99Ms, P99) === 'invalid') return 'p99Ms';
  if (judge(r.baselineP99Ms, BASELINE) === 'invalid') return 'baselineP99Ms';
  if (judge(r.gpuUtil, GPU) === 'invalid') return 'gpuUtil';
  if (judge(slots, SLOTS_RULE) === 'invalid') return 'slots';
  return undefined;
}

// ---------------------------------------------------------------- addresses
// The same character walk as the filter's (filter/assembly/lib/snapshot-rules.ts): no regular
// expressions or splits, so both sides read alike and decoding stays cheap.

function isDecimal(s: string, from: number, to: number, maxLen: number): boolean {
  const n = to - from;
  if (n <= 0 || n > maxLen) return false;
  if (n > 1 && s.charCodeAt(from) === 48) return false; // no leading zeros: "010" is octal to some parsers
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

function decimalValue(s: string, from: number, to: number): number {
  let v = 0;
  for (let i = from; i < to; i++) v = v * 10 + (s.charCodeAt(i) - 48);
  return v;
}

/** Dotted quad in s[from, to). */
export function isIPv4(s: string, from = 0, to = s.length): boolean {
  let parts = 0;
  let start = from;
  for (let i = from; i <= to; i++) {
    if (i === to || s.charCodeAt(i) === 46) {
      if (!isDecimal(s, start, i, 3) || decimalValue(s, start, i) > 255) return false;
      parts++;
      start = i + 1;
    }
  }
  return parts === 4;
}

function isHex(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
}

/** IPv6 text form in s[from, to) without zone id: hex groups, at most one "::", an optional dotted-quad tail. */
export function isIPv6(s: string, from = 0, to = s.length): boolean {
  const n = to - from;
  if (n < 2 || n > 45) return false;
  let units = 0;
  let gap = false;
  let i = from;
  if (s.charCodeAt(i) === 58) {
    // leading "::"
    if (s.charCodeAt(i + 1) !== 58) return false;
    gap = true;
    i += 2;
    if (i === to) return true;
  }
  while (i < to) {
    let j = i;
    while (j < to && s.charCodeAt(j) !== 58) j++;
    let dotted = false;
    for (let k = i; k < j; k++) if (s.charCodeAt(k) === 46) { dotted = true; break; }
    if (dotted) {
      if (j !== to || !isIPv4(s, i, j)) return false;
      units += 2;
    } else {
      if (j - i < 1 || j - i > 4) return false;
      for (let k = i; k < j; k++) if (!isHex(s.charCodeAt(k))) return false;
      units += 1;
    }
    if (j === to) break;
    if (j + 1 < to && s.charCodeAt(j + 1) === 58) {
      if (gap) return false;
      gap = true;
      i = j + 2; // "::" at the end: the loop condition ends the scan
    } else {
      i = j + 1;
      if (i === to) return false; // trailing single ':'
    }
  }
  return gap ? units <= 7 : units === 8;
}

/** "a.b.c.d:port" or "[ipv6]:port", port 1..65535 without leading zeros: what x-switchyard-endpoint may carry. */
export function isEndpointAddress(s: string): boolean {
  const n = s.length;
  const colon = s.lastIndexOf(':');
  if (colon <= 0) return false;
  if (!isDecimal(s, colon + 1, n, 5)) return false;
  const port = decimalValue(s, colon + 1, n);
  if (port < 1 || port > 65535) return false;
  if (s.charCodeAt(0) === 91) return colon >= 2 && s.charCodeAt(colon - 1) === 93 && isIPv6(s, 1, colon - 1);
  return isIPv4(s, 0, colon);
}
