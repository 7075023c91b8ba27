// A header map with the semantics of Envoy's Http::HeaderMapImpl as seen through the Wasm ABI
// (source/common/http/header_map_impl.cc, source/extensions/common/wasm/context.cc):
//  - keys are lower-cased (ASCII only, like Http::LowerCaseString);
//  - insertion order is kept, but pseudo headers (':...') always stay in front of the others;
//  - addCopy of an "inline" (O(1)) header that already exists appends to the existing entry
//    with ',' ('; ' for cookie); other headers get a further entry (duplicates);
//  - setCopy (proxy_replace_header_map_value) removes every entry of that name, then adds;
//  - get (proxy_get_header_map_value) returns the FIRST entry's value only (Envoy's TODO);
//  - byteSize (proxy_get_header_map_size) is the sum of key and value lengths.

import type { Pair } from './pairs';

export type HeaderMapKind = 'request' | 'response' | 'request-trailers' | 'response-trailers';

const REQ_RESP_INLINE = [
  'connection', 'content-type', 'x-envoy-decorator-operation', 'keep-alive', 'proxy-connection',
  'proxy-status', 'x-request-id', 'transfer-encoding', 'upgrade', 'via', 'content-length',
  'x-envoy-attempt-count',
];
const REQ_INLINE = new Set([
  ...REQ_RESP_INLINE,
  ':authority', ':method', ':path', ':protocol', ':scheme', 'x-client-trace-id',
  'x-envoy-downstream-service-cluster', 'x-envoy-downstream-service-node',
  'x-envoy-expected-rq-timeout-ms', 'x-envoy-external-address', 'x-envoy-force-trace',
  'x-envoy-hedge-on-per-try-timeout', 'x-envoy-internal', 'x-envoy-ip-tags', 'x-envoy-original-url',
  'x-envoy-original-method', 'x-envoy-retriable-status-codes', 'x-envoy-retriable-header-names',
  'x-envoy-retry-on', 'x-envoy-retry-grpc-on', 'x-envoy-upstream-alt-stat-name',
  'x-envoy-upstream-rq-timeout-alt-response', 'expect', 'x-forwarded-client-cert', 'x-forwarded-for',
  'x-forwarded-host', 'x-forwarded-proto', 'grpc-timeout', 'te', 'user-agent', 'x-envoy-max-retries',
  'x-envoy-upstream-rq-timeout-ms', 'x-envoy-upstream-rq-per-try-timeout-ms',
  'x-envoy-upstream-stream-duration-ms',
]);
const RESP_INLINE = new Set([
  ...REQ_RESP_INLINE,
  ':status', 'date', 'x-envoy-degraded', 'x-envoy-immediate-health-check-fail', 'x-envoy-ratelimited',
  'x-envoy-upstream-canary', 'x-envoy-upstream-healthchecked-cluster', 'location', 'server',
  'x-envoy-overloaded', 'x-envoy-upstream-service-time',
]);
const RESP_TRAILERS_INLINE = new Set(['grpc-status', 'grpc-message']);
const NONE = new Set<string>();

// Header names repeat: lower-cased forms of short names are memoized (bounded).
const LOWER_CACHE = new Map<string, string>();
const LOWER_CACHE_MAX_ENTRIES = 1024;
const LOWER_CACHE_MAX_LEN = 64;

export function lowerAscii(s: string): string {
  if (s.length > LOWER_CACHE_MAX_LEN) return lowerAsciiUncached(s);
  let r = LOWER_CACHE.get(s);
  if (r === undefined) {
    r = lowerAsciiUncached(s);
    if (LOWER_CACHE.size >= LOWER_CACHE_MAX_ENTRIES) LOWER_CACHE.clear();
    LOWER_CACHE.set(s, r);
  }
  return r;
}

function lowerAsciiUncached(s: string): string {
  // Fast path: most keys are already lower case (no RegExp, no allocation).
  const n = s.length;
  let i = 0;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 65 && c <= 90) break;
  }
  if (i === n) return s;
  let out = s.slice(0, i);
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    out += c >= 65 && c <= 90 ? String.fromCharCode(c + 32) : s[i];
  }
  return out;
}

const hasOwn = Object.prototype.hasOwnProperty;

export class HeaderMap {
  /**
   * Entries in iteration order. Do not mutate from outside. (Replaced by a copy, not changed in
   * place, after snapshot().)
   */
  entries: Pair[] = [];
  /** The entries (array and pairs) are shared with a snapshot() taker: copy before mutating. */
  private shared = false;
  private pseudoEnd = 0;
  private bytes = 0;
  private readonly inline: Set<string>;

  constructor(readonly kind: HeaderMapKind, init?: Iterable<readonly [string, string]> | Record<string, string>) {
    this.inline = kind === 'request' ? REQ_INLINE : kind === 'response' ? RESP_INLINE
      : kind === 'response-trailers' ? RESP_TRAILERS_INLINE : NONE;
    if (init) {
      if (Array.isArray(init)) {
        for (let i = 0; i < init.length; i++) {
          const p = init[i] as readonly [string, string];
          this.addLower(lowerAscii(p[0]), String(p[1]));
        }
      } else if (Symbol.iterator in (init as object)) {
        for (const [k, v] of init as Iterable<readonly [string, string]>) this.add(k, String(v));
      } else {
        this.addRecord(init as Record<string, string>);
      }
    }
  }

  /**
   * Adds the own enumerable string-keyed properties of an object, in Object.entries order
   * (for-in filtered to own properties visits exactly those, in that order, and V8 serves it
   * from the object's enum cache without the keys array).
   */
  addRecord(init: Record<string, string>): void {
    for (const k in init) {
      if (hasOwn.call(init, k)) this.addLower(lowerAscii(k), String(init[k]));
    }
  }

  get size(): number {
    return this.entries.length;
  }

  byteSize(): number {
    return this.bytes;
  }

  get(key: string): string | undefined {
    return this.getLower(lowerAscii(key));
  }

  /** get() for a key that is already lower-case (lowerAscii(k) === k). */
  getLower(k: string): string | undefined {
    const e = this.entries;
    for (let i = 0; i < e.length; i++) if (e[i][0] === k) return e[i][1];
    return undefined;
  }

  getAll(key: string): string[] {
    const k = lowerAscii(key);
    return this.entries.filter((e) => e[0] === k).map((e) => e[1]);
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  /** Http::HeaderMap::addCopy */
  add(key: string, value: string): void {
    this.addLower(lowerAscii(key), value);
  }

  /**
   * The current entries without copying them, like pairs() for a caller that does not mutate
   * them: the map copies its entries before its next mutation, so the snapshot never changes.
   */
  snapshot(): Pair[] {
    this.shared = true;
    return this.entries;
  }

  /** Entries that may be mutated (unshared first). */
  private own(): Pair[] {
    if (this.shared) {
      this.entries = this.pairs();
      this.shared = false;
    }
    return this.entries;
  }

  /** add() for a key that is already lower-case (lowerAscii(k) === k). */
  addLower(k: string, value: string): void {
    const e = this.own();
    if (this.inline.has(k)) {
      for (let i = 0; i < e.length; i++) {
        if (e[i][0] === k) {
          const delim = k === 'cookie' ? '; ' : ',';
          if (e[i][1].length === 0) {
            e[i][1] = value;
            this.bytes += value.length;
          } else {
            e[i][1] += delim + value;
            this.bytes += delim.length + value.length;
          }
          return;
        }
      }
    }
    if (k.charCodeAt(0) === 58 /* ':' */) {
      if (this.pseudoEnd === e.length) e.push([k, value]);
      else e.splice(this.pseudoEnd, 0, [k, value]);
      this.pseudoEnd++;
    } else {
      e.push([k, value]);
    }
    this.bytes += k.length + value.length;
  }

  /** Http::HeaderMap::setCopy: remove all entries of the key, then add. */
  set(key: string, value: string): void {
    this.setLower(lowerAscii(key), value);
  }

  /** set() for a key that is already lower-case (lowerAscii(k) === k). */
  setLower(k: string, value: string): void {
    this.removeLower(k);
    this.addLower(k, value);
  }

  remove(key: string): void {
    this.removeLower(lowerAscii(key));
  }

  /** remove() for a key that is already lower-case (lowerAscii(k) === k). */
  removeLower(k: string): void {
    let e = this.entries;
    let i = e.length - 1;
    while (i >= 0 && e[i][0] !== k) i--;
    if (i < 0) return; // absent: nothing to change (or to copy)
    e = this.own();
    for (; i >= 0; i--) {
      if (e[i][0] === k) {
        this.bytes -= e[i][0].length + e[i][1].length;
        // e.splice(i, 1) without the array of removed elements
        for (let j = i + 1; j < e.length; j++) e[j - 1] = e[j];
        e.pop();
        if (i < this.pseudoEnd) this.pseudoEnd--;
      }
    }
  }

  clear(): void {
    if (this.shared) {
      this.entries = [];
      this.shared = false;
    } else {
      this.entries.length = 0;
    }
    this.pseudoEnd = 0;
    this.bytes = 0;
  }

  /** Context::setHeaderMapPairs: remove every key, then addCopy each pair. */
  setPairs(pairs: readonly Pair[]): void {
    this.clear();
    for (let i = 0; i < pairs.length; i++) this.addLower(lowerAscii(pairs[i][0]), pairs[i][1]);
  }

  pairs(): Pair[] {
    const e = this.entries;
    const out: Pair[] = new Array(e.length);
    for (let i = 0; i < e.length; i++) out[i] = [e[i][0], e[i][1]];
    return out;
  }

  toObject(): Record<string, string> {
    const o: Record<string, string> = {};
    for (const [k, v] of this.entries) o[k] = k in o ? `${o[k]},${v}` : v;
    return o;
  }
}
