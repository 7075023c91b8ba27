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
  return judge(v, { min: RTT_MIN, max: RTT_MAX, nanIsUnknown: true }) === 'ok' ? v : NaN;
}

export const SLOTS_RULE = INSTANCE_NUMBER_RULES[INSTANCE_NUMBER_RULES.length - 1];

/** First invalid number field of a record (slots given apart: it is optional on input), or undefined. */
export function firstInvalidNumber(r: Record<Exclude<InstanceNumberField, 'slots'>, number>, slots: number): InstanceNumberField | undefined {
  for (const rule of INSTANCE_NUMBER_RULES) {
    const v = rule.field === 'slots' ? slots : r[rule.field];
    if (judge(v, rule) === 'invalid') return rule.field;
  }
  return undefined;
}

// ---------------------------------------------------------------- addresses

function isDecimal(s: string, maxLen: number): boolean {
  if (s.length === 0 || s.length > maxLen) return false;
  if (s.length > 1 && s[0] === '0') return false; // no leading zeros: "010" is octal to some parsers
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

export function isIPv4(s: string): boolean {
  const parts = s.split('.');
  return parts.length === 4 && parts.every((p) => isDecimal(p, 3) && Number(p) <= 255);
}

function isHexGroup(s: string): boolean {
  return s.length >= 1 && s.length <= 4 && /^[0-9a-fA-F]+$/.test(s);
}

/** IPv6 text form without zone id: hex groups, at most one "::", an optional dotted-quad tail. */
export function isIPv6(s: string): boolean {
  if (s.length < 2 || s.length > 45) return false;
  const dbl = s.indexOf('::');
  if (dbl >= 0 && s.indexOf('::', dbl + 1) >= 0) return false;
  const groupsOf = (part: string): string[] | null => (part === '' ? [] : part.split(':'));
  const head = dbl >= 0 ? groupsOf(s.slice(0, dbl)) : groupsOf(s);
  const tail = dbl >= 0 ? groupsOf(s.slice(dbl + 2)) : [];
  if (!head || !tail) return false;
  const all = [...head, ...tail];
  let units = 0;
  for (let i = 0; i < all.length; i++) {
    const g = all[i];
    if (i === all.length - 1 && g.includes('.')) {
      if (!isIPv4(g)) return false;
      units += 2;
    } else {
      if (!isHexGroup(g)) return false;
      units += 1;
    }
  }
  return dbl >= 0 ? units <= 7 : units === 8;
}

/** "a.b.c.d:port" or "[ipv6]:port", port 1..65535 without leading zeros: what x-switchyard-endpoint may carry. */
export function isEndpointAddress(s: string): boolean {
  const colon = s.lastIndexOf(':');
  if (colon <= 0) return false;
  const port = s.slice(colon + 1);
  if (!isDecimal(port, 5) || Number(port) < 1 || Number(port) > 65535) return false;
  const host = s.slice(0, colon);
  if (host.startsWith('[')) return host.endsWith(']') && isIPv6(host.slice(1, -1));
  return isIPv4(host);
}
