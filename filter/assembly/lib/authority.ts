// Authority matching: which configured service (if any) a request's `:authority` belongs to.
// Exact names beat wildcards; among wildcards the longest suffix wins. Comparison is
// case-insensitive and ignores the port and a trailing dot, so `Payment.Example.:8080` matches
// `payment.example`.
//
// The filter must match at least every authority Envoy routes to the service's virtual host,
// or a client can pick an authority that escapes the link policy. Envoy compares the whole Host
// against the virtual host's domains, and the shipped routes (and Istio's) list `host:*`, a
// prefix wildcard that matches `host:` followed by anything (`host:80:80`, `host:a:b`). So the
// host is everything before the FIRST colon (or the bracketed IPv6 literal), never a parsed port.
// Istio's short names are covered by deriving them from cluster-local names (shortNames()).

/** Lowercase host without port or trailing dot: the text before the first ':' (or `[v6]`). */
export function normalizeHost(authority: string): string {
  let end = authority.length;
  if (authority.startsWith("[")) {
    const close = authority.indexOf("]");
    if (close > 0) end = close + 1;
  } else {
    const colon = authority.indexOf(":");
    if (colon >= 0) end = colon;
  }
  if (end > 0 && authority.charCodeAt(end - 1) == 0x2e) end--;
  return authority.substring(0, end).toLowerCase();
}

/** A pattern is `host` or `*.suffix`; returns "" when valid, else the reason. */
export function checkPattern(p: string): string {
  if (p.length == 0) return "must not be empty";
  if (p.length > 253) return "longer than 253 characters";
  let body = p;
  if (p.startsWith("*.")) body = p.substring(2);
  else if (p == "*") return "bare '*' is not allowed; list the authorities";
  if (body.length == 0) return "wildcard needs a suffix";
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x2e || c == 0x5f;
    if (!ok) return "invalid character '" + String.fromCharCode(c) + "' (use lowercase host names, '*.' only as a prefix, no port)";
  }
  if (body.startsWith(".") || body.endsWith(".") || body.includes("..")) return "empty label";
  return "";
}

const CLUSTER_SUFFIX = ".svc.cluster.local";

/**
 * The names Istio's sidecar routes to the same service as an exact `svc.ns.svc.cluster.local`
 * entry from any namespace: `svc.ns`, `svc.ns.svc`, `svc.ns.svc.cluster`. The bare `svc` is not
 * derived: it means this service only inside namespace `ns`, and another service elsewhere, so
 * operators list it explicitly where the proxy runs in `ns` (docs/contracts.md).
 */
export function shortNames(pattern: string): Array<string> {
  const out = new Array<string>();
  if (pattern.startsWith("*.") || !pattern.endsWith(CLUSTER_SUFFIX)) return out;
  const svcNs = pattern.substring(0, pattern.length - CLUSTER_SUFFIX.length);
  const dot = svcNs.indexOf(".");
  if (dot <= 0 || dot == svcNs.length - 1 || svcNs.indexOf(".", dot + 1) >= 0) return out; // exactly `svc.ns`
  out.push(svcNs);
  out.push(svcNs + ".svc");
  out.push(svcNs + ".svc.cluster");
  return out;
}

class Wildcard {
  constructor(public suffix: string, public target: i32) {}
}

const SUFFIX_SEED: u32 = 2166136261;

/** FNV-1a over the suffix's characters from its last to its first (what matchHost accumulates). */
function suffixHash(s: string): u32 {
  let h: u32 = SUFFIX_SEED;
  for (let i = s.length - 1; i >= 0; i--) h = (h ^ <u32>s.charCodeAt(i)) * 16777619;
  return h;
}

/** host[at .. at + s.length) == s, compared in place. */
function sameAt(host: string, at: i32, s: string): bool {
  for (let j = 0; j < s.length; j++) if (host.charCodeAt(at + j) != s.charCodeAt(j)) return false;
  return true;
}

class CacheEntry {
  constructor(public raw: ArrayBuffer, public target: i32) {}
}

/** Authorities longer than this are matched but never cached: no real host name is this long. */
export const MAX_CACHED_AUTHORITY_BYTES: i32 = 320;
/** Budget of the raw-authority cache per matcher (key bytes plus a per-entry overhead). */
export const CACHE_BUDGET_BYTES: i32 = 256 * 1024;
const ENTRY_OVERHEAD_BYTES: i32 = 64;

export class AuthorityMatcher {
  private exact: Map<string, i32> = new Map();
  // Wildcard suffix (with its leading dot: ".example.com") → target. Looked up once per label of
  // the host, left to right, so the first hit is the longest suffix.
  private wildcards: Map<string, i32> = new Map();
  // The same wildcards by the hash of their suffix taken right to left (suffixHash), so the match
  // walks the host once from its end; and the longest suffix, past which nothing can match.
  private byHash: Map<u32, Array<Wildcard>> = new Map();
  private longestSuffix: i32 = 0;
  // Raw `:authority` bytes → target, so the request path neither decodes nor lowercases a
  // value it has seen before. Bounded in bytes and cleared when full: spraying random (or huge)
  // authorities costs a re-match, never memory.
  private cache: Map<u32, CacheEntry> = new Map();
  private cacheBytes: i32 = 0;

  /** Adds a validated pattern. The first pattern added for a name wins. */
  add(pattern: string, target: i32): void {
    if (pattern.startsWith("*.")) {
      const suffix = pattern.substring(1); // keep the dot
      if (!this.wildcards.has(suffix)) {
        this.wildcards.set(suffix, target);
        const h = suffixHash(suffix);
        if (!this.byHash.has(h)) this.byHash.set(h, new Array<Wildcard>());
        this.byHash.get(h).push(new Wildcard(suffix, target));
        if (suffix.length > this.longestSuffix) this.longestSuffix = suffix.length;
      }
    } else if (!this.exact.has(pattern)) {
      this.exact.set(pattern, target);
    }
  }

  /** Target for a host (any case, with or without port), or -1. */
  match(authority: string): i32 {
    return this.matchHost(normalizeHost(authority));
  }

  /** Target for a normalized host (or for a pattern, `*.x` giving the wildcard answer for x's subdomains). */
  matchHost(host: string): i32 {
    if (this.exact.has(host)) return this.exact.get(host);
    if (this.wildcards.size == 0) return -1;
    // Linear whatever the shape (issue 24 #1): no substring is built per label. A suffix longer
    // than the longest configured one cannot match, so only the last `longestSuffix` characters
    // are scanned, right to left; each '.' in them is tried by index (a hash of the suffix kept
    // while walking, then a compare of the candidate in place). The longest hit wins, as before.
    // `*.example.com` needs at least one label before the suffix: the dot at position 0 is never
    // a match.
    const n = host.length;
    const lo = max(1, n - this.longestSuffix);
    let h: u32 = SUFFIX_SEED;
    let best: i32 = -1;
    for (let i = n - 1; i >= lo; i--) {
      const c = <u32>host.charCodeAt(i);
      h = (h ^ c) * 16777619;
      if (c != 0x2e || !this.byHash.has(h)) continue;
      const list = this.byHash.get(h);
      for (let k = 0; k < list.length; k++) {
        const w = list[k];
        if (w.suffix.length == n - i && sameAt(host, i, w.suffix)) { best = w.target; break; }
      }
    }
    return best;
  }

  /** Same as match() on raw header bytes, cached by content. */
  matchRaw(raw: ArrayBuffer): i32 {
    const n = raw.byteLength;
    if (n > MAX_CACHED_AUTHORITY_BYTES) return this.matchBytes(raw);
    const h = fnv1a(raw);
    if (this.cache.has(h)) {
      const e = this.cache.get(h);
      if (sameBytes(e.raw, raw)) return e.target;
    }
    const target = this.matchBytes(raw);
    const cost = n + ENTRY_OVERHEAD_BYTES;
    if (this.cacheBytes + cost > CACHE_BUDGET_BYTES) { this.cache.clear(); this.cacheBytes = 0; }
    if (this.cache.has(h)) this.cacheBytes -= this.cache.get(h).raw.byteLength + ENTRY_OVERHEAD_BYTES;
    this.cache.set(h, new CacheEntry(raw, target));
    this.cacheBytes += cost;
    return target;
  }

  /**
   * Envoy answers 400 to a Host with bytes outside ASCII before any filter runs; lossy UTF-8
   * decoding could otherwise merge such a byte with the next '.' and change which suffix matches.
   * Such an authority matches nothing (the link header is stripped, the fail-safe route stays local).
   */
  private matchBytes(raw: ArrayBuffer): i32 {
    const p = changetype<usize>(raw);
    const n = <usize>raw.byteLength;
    for (let i: usize = 0; i < n; i++) if (load<u8>(p + i) >= 0x80) return -1;
    return this.match(String.UTF8.decode(raw));
  }

  cacheSize(): i32 { return this.cache.size; }
  /** Bytes charged to the cache (raw keys plus a fixed per-entry overhead). */
  cacheBytesUsed(): i32 { return this.cacheBytes; }
}

function fnv1a(buf: ArrayBuffer): u32 {
  let h: u32 = 2166136261;
  const p = changetype<usize>(buf);
  const n = <usize>buf.byteLength;
  for (let i: usize = 0; i < n; i++) {
    h ^= <u32>load<u8>(p + i);
    h *= 16777619;
  }
  return h;
}

function sameBytes(a: ArrayBuffer, b: ArrayBuffer): bool {
  if (a.byteLength != b.byteLength) return false;
  return memory.compare(changetype<usize>(a), changetype<usize>(b), <usize>a.byteLength) == 0;
}
