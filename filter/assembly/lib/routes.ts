// One authority lookup per request: which link service and which load-aware service (if any) a
// request's `:authority` belongs to. Built once per configuration from both service lists, so the
// authority → service mapping lives in one place and the request path matches once.
//
// Each list keeps its own precedence (exact beats wildcard, longest suffix wins, first listed
// wins): a route's answer for list L is L's own matcher asked about the route's pattern. That is
// exact for any host the union matcher sends to the pattern — for a wildcard `*.s` chosen as the
// longest matching suffix of the union, every wildcard of L that matches the host is a suffix of
// `.s`, which is what L.matchHost("*.s") looks up.
import { AuthorityMatcher, shortNames } from "./authority";
import { PluginConfig } from "./config";

export const NO_SERVICE: i32 = -1;

export class RouteTable {
  matcher: AuthorityMatcher = new AuthorityMatcher();
  /** Route → index in link.services, or NO_SERVICE. */
  link: Array<i32> = [];
  /** Route → index in loadAware.services, or NO_SERVICE. */
  loadAware: Array<i32> = [];

  get size(): i32 { return this.link.length; }

  /** Route index for raw `:authority` bytes, or -1. */
  @inline match(raw: ArrayBuffer): i32 { return this.matcher.matchRaw(raw); }
}

/** Every configured pattern (listed first, then the derived short names), each once. */
function patternsOf<T>(services: Array<T>, seen: Set<string>, out: Array<string>): void {
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < services.length; i++) {
      const a = services[i].authorities;
      for (let j = 0; j < a.length; j++) {
        const names = pass == 0 ? [a[j]] : shortNames(a[j]);
        for (let k = 0; k < names.length; k++) {
          if (!seen.has(names[k])) { seen.add(names[k]); out.push(names[k]); }
        }
      }
    }
  }
}

export function buildRoutes(cfg: PluginConfig): RouteTable {
  const t = new RouteTable();
  const linkM = cfg.linkMatcher();
  const laM = cfg.loadAware.enabled ? cfg.loadAwareMatcher() : new AuthorityMatcher();
  const seen = new Set<string>();
  const patterns = new Array<string>();
  patternsOf(cfg.link.services, seen, patterns);
  if (cfg.loadAware.enabled) patternsOf(cfg.loadAware.services, seen, patterns);
  for (let i = 0; i < patterns.length; i++) {
    const p = patterns[i];
    t.matcher.add(p, t.link.length);
    t.link.push(linkM.matchHost(p));
    t.loadAware.push(laM.matchHost(p));
  }
  return t;
}
