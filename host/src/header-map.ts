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

const UPPER = /[A-Z]/;
export function lowerAscii(s: string): string {
  if (!UPPER.test(s)) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += c >= 65 && c <= 90 ? String.fromCharCode(c + 32) : s[i];
  }
  return out;
}

export class HeaderMap {
  /** Entries in iteration order. Do not mutate from outside. */
  readonly entries: Pair[] = [];
  private pseudoEnd = 0;
  private bytes = 0;
  private readonly inline: Set<string>;

  constructor(readonly kind: HeaderMapKind, init?: Iterable<readonly [string, string]> | Record<string, string>) {
    this.inline = kind === 'request' ? REQ_INLINE : kind === 'response' ? RESP_INLINE
      : kind === 'response-trailers' ? RESP_TRAILERS_INLINE : NONE;
    if (init) {
      const it = Symbol.iterator in (init as object)
        ? (init as Iterable<readonly [string, string]>) : Object.entries(init as Record<string, string>);
      for (const [k, v] of it) this.add(k, String(v));
    }
  }

  get size(): number {
    return this.entries.length;
  }

  byteSize(): number {
    return this.bytes;
  }

  get(key: string): string | undefined {
    const k = lowerAscii(key);
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
    const k = lowerAscii(key);
    const e = this.entries;
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
      e.splice(this.pseudoEnd, 0, [k, value]);
      this.pseudoEnd++;
    } else {
      e.push([k, value]);
    }
    this.bytes += k.length + value.length;
  }

  /** Http::HeaderMap::setCopy: remove all entries of the key, then add. */
  set(key: string, value: string): void {
    const k = lowerAscii(key);
    this.removeLower(k);
    this.add(k, value);
  }

  remove(key: string): void {
    this.removeLower(lowerAscii(key));
  }

  private removeLower(k: string): void {
    const e = this.entries;
    for (let i = e.length - 1; i >= 0; i--) {
      if (e[i][0] === k) {
        this.bytes -= e[i][0].length + e[i][1].length;
        e.splice(i, 1);
        if (i < this.pseudoEnd) this.pseudoEnd--;
      }
    }
  }

  clear(): void {
    this.entries.length = 0;
    this.pseudoEnd = 0;
    this.bytes = 0;
  }

  /** Context::setHeaderMapPairs: remove every key, then addCopy each pair. */
  setPairs(pairs: readonly Pair[]): void {
    this.clear();
    for (const [k, v] of pairs) this.add(k, v);
  }

  pairs(): Pair[] {
    return this.entries.map(([k, v]) => [k, v] as Pair);
  }

  toObject(): Record<string, string> {
    const o: Record<string, string> = {};
    for (const [k, v] of this.entries) o[k] = k in o ? `${o[k]},${v}` : v;
    return o;
  }
}
