// Authority matching: which configured service (if any) a request's `:authority` belongs to.
// Exact names beat wildcards; among wildcards the longest suffix wins. Comparison is
// case-insensitive and ignores the port and a trailing dot, so `Payment.Example.:8080` matches
// `payment.example`.

/** Lowercase host without port or trailing dot. Handles `[v6]:port`. */
export function normalizeHost(authority: string): string {
  let end = authority.length;
  if (authority.startsWith("[")) {
    const close = authority.indexOf("]");
    if (close > 0) end = close + 1;
  } else {
    const colon = authority.lastIndexOf(":");
    if (colon >= 0 && authority.indexOf(":") == colon) end = colon;
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

class Wildcard {
  constructor(public suffix: string, public target: i32) {}
}

class CacheEntry {
  constructor(public raw: ArrayBuffer, public target: i32) {}
}

const CACHE_LIMIT = 4096;

export class AuthorityMatcher {
  private exact: Map<string, i32> = new Map();
  private wildcards: Array<Wildcard> = [];
  // Raw `:authority` bytes → target, so the request path neither decodes nor lowercases a
  // value it has seen before. Bounded: cleared when full, so spraying random authorities
  // costs a re-match, never unbounded memory.
  private cache: Map<u32, CacheEntry> = new Map();

  /** Adds a validated pattern. The first pattern added for a name wins. */
  add(pattern: string, target: i32): void {
    if (pattern.startsWith("*.")) {
      const suffix = pattern.substring(1); // keep the dot: ".example.com"
      for (let i = 0; i < this.wildcards.length; i++) if (this.wildcards[i].suffix == suffix) return;
      this.wildcards.push(new Wildcard(suffix, target));
      // Longest suffix first.
      this.wildcards.sort((a: Wildcard, b: Wildcard): i32 => b.suffix.length - a.suffix.length);
    } else if (!this.exact.has(pattern)) {
      this.exact.set(pattern, target);
    }
  }

  /** Target for a host (any case, with or without port), or -1. */
  match(authority: string): i32 {
    const host = normalizeHost(authority);
    if (this.exact.has(host)) return this.exact.get(host);
    for (let i = 0; i < this.wildcards.length; i++) {
      const w = this.wildcards[i];
      // `*.example.com` needs at least one label before the suffix.
      if (host.length > w.suffix.length && host.endsWith(w.suffix)) return w.target;
    }
    return -1;
  }

  /** Same as match() on raw header bytes, cached by content. */
  matchRaw(raw: ArrayBuffer): i32 {
    const h = fnv1a(raw);
    if (this.cache.has(h)) {
      const e = this.cache.get(h);
      if (sameBytes(e.raw, raw)) return e.target;
    }
    const target = this.match(String.UTF8.decode(raw));
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(h, new CacheEntry(raw, target));
    return target;
  }

  cacheSize(): i32 { return this.cache.size; }
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
