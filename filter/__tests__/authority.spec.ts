import { AuthorityMatcher, normalizeHost, checkPattern, shortNames, MAX_CACHED_AUTHORITY_BYTES, CACHE_BUDGET_BYTES } from "../assembly/lib/authority";
import { parseConfig } from "../assembly/lib/config";
import { buildRoutes, NO_SERVICE } from "../assembly/lib/routes";

describe("normalizeHost", () => {
  it("lowercases and drops the port and a trailing dot", () => {
    expect(normalizeHost("Payment.Example:8080")).toBe("payment.example");
    expect(normalizeHost("payment.example.")).toBe("payment.example");
    expect(normalizeHost("payment.example.:80")).toBe("payment.example");
    expect(normalizeHost("[::1]:8080")).toBe("[::1]");
    expect(normalizeHost("10.0.0.1:9000")).toBe("10.0.0.1");
  });

  // Envoy's `host:*` domain is a prefix wildcard: it routes `host:` followed by anything to the
  // virtual host, so the filter's host is everything before the first colon.
  it("keeps only the text before the first colon (double port, non-numeric port)", () => {
    expect(normalizeHost("payment-service.prod.svc.cluster.local:80:80")).toBe("payment-service.prod.svc.cluster.local");
    expect(normalizeHost("payment-service.prod.svc.cluster.local:a:b")).toBe("payment-service.prod.svc.cluster.local");
    expect(normalizeHost("payment.example:")).toBe("payment.example");
    expect(normalizeHost("payment.example.:80:80")).toBe("payment.example");
  });

  it("handles IPv6 literals, a trailing dot and uppercase", () => {
    expect(normalizeHost("[fd00::1]")).toBe("[fd00::1]");
    expect(normalizeHost("[FD00::1]:443:1")).toBe("[fd00::1]");
    expect(normalizeHost("PAYMENT.Example.")).toBe("payment.example");
  });
});

describe("shortNames", () => {
  it("derives the Istio short names of a cluster-local name, never the bare service name", () => {
    const n = shortNames("payment-service.prod.svc.cluster.local");
    expect(n.length).toBe(3);
    expect(n[0]).toBe("payment-service.prod");
    expect(n[1]).toBe("payment-service.prod.svc");
    expect(n[2]).toBe("payment-service.prod.svc.cluster");
    expect(shortNames("payment.example").length).toBe(0);
    expect(shortNames("*.prod.svc.cluster.local").length).toBe(0);
    expect(shortNames("a.b.c.svc.cluster.local").length).toBe(0);
  });

  it("derives nothing unless the name before .svc.cluster.local is exactly two non-empty labels", () => {
    expect(shortNames(".prod.svc.cluster.local").length).toBe(0);
    expect(shortNames("payment..svc.cluster.local").length).toBe(0);
    expect(shortNames("payment.svc.cluster.local").length).toBe(0);
    expect(shortNames("svc.cluster.local").length).toBe(0);
    expect(shortNames("a.b.svc.cluster.local").length).toBe(3);
  });
});

describe("checkPattern", () => {
  it("accepts hosts and *.suffix wildcards only", () => {
    expect(checkPattern("a.example")).toBe("");
    expect(checkPattern("*.example.com")).toBe("");
    expect(checkPattern("")).toBe("must not be empty");
    expect(checkPattern("*.")).toBe("wildcard needs a suffix");
    expect(checkPattern("a.*.example")).toBe("invalid character '*' (use lowercase host names, '*.' only as a prefix, no port)");
    expect(checkPattern("a..example")).toBe("empty label");
  });

  it("accepts exactly a-z, 0-9, '-', '.', '_' (each range's first and last character)", () => {
    expect(checkPattern("az.09-_.example")).toBe("");
    const outside = ["`", "{", "/", ":", "A", "Z", ","];
    for (let i = 0; i < outside.length; i++) {
      expect(checkPattern("a" + outside[i] + ".example")).toBe("invalid character '" + outside[i] + "' (use lowercase host names, '*.' only as a prefix, no port)");
    }
  });
});

describe("AuthorityMatcher", () => {
  it("prefers exact names, then the longest wildcard suffix", () => {
    const m = new AuthorityMatcher();
    m.add("*.example.com", 0);
    m.add("*.pay.example.com", 1);
    m.add("api.pay.example.com", 2);
    expect(m.match("api.pay.example.com")).toBe(2);
    expect(m.match("web.pay.example.com")).toBe(1);
    expect(m.match("a.b.pay.example.com")).toBe(1);
    expect(m.match("www.example.com")).toBe(0);
    expect(m.match("WWW.Example.COM:443")).toBe(0);
    // a wildcard needs at least one label in front of the suffix
    expect(m.match("example.com")).toBe(-1);
    expect(m.match("notexample.com")).toBe(-1);
    expect(m.match("other.org")).toBe(-1);
  });

  it("keeps the first target for a repeated pattern", () => {
    const m = new AuthorityMatcher();
    m.add("a.example", 0);
    m.add("a.example", 1);
    expect(m.match("a.example")).toBe(0);
  });

  it("caches raw authorities by content and stays bounded", () => {
    const m = new AuthorityMatcher();
    m.add("a.example", 3);
    expect(m.matchRaw(String.UTF8.encode("A.example:80"))).toBe(3);
    expect(m.matchRaw(String.UTF8.encode("A.example:80"))).toBe(3);
    expect(m.matchRaw(String.UTF8.encode("b.example"))).toBe(-1);
    expect(m.cacheSize()).toBe(2);
    for (let i = 0; i < 5000; i++) m.matchRaw(String.UTF8.encode("h" + i.toString() + ".example"));
    expect(m.cacheBytesUsed()).toBeLessThanOrEqual(CACHE_BUDGET_BYTES);
    expect(m.matchRaw(String.UTF8.encode("a.example"))).toBe(3);
  });

  it("keeps two authorities with the same cache hash apart, and charges their slot once", () => {
    // an FNV-1a (32-bit) collision found by search: same hash, same length, different bytes
    const a = "nl64wsrt.example", b = "ucdg92lf.example";
    const m = new AuthorityMatcher();
    m.add(a, 0);
    m.add(b, 1);
    expect(m.matchRaw(String.UTF8.encode(a))).toBe(0);
    const one = m.cacheBytesUsed();
    expect(m.matchRaw(String.UTF8.encode(b))).toBe(1);
    expect(m.matchRaw(String.UTF8.encode(a))).toBe(0);
    expect(m.cacheSize()).toBe(1);
    expect(m.cacheBytesUsed()).toBe(one);
  });

  it("keeps apart two authorities of different lengths whose hashes collide", () => {
    // an FNV-1a (32-bit) collision found by search between a 7- and an 8-character label: a cache
    // that took the hash for the key would answer the second with the first one's target
    const a = "ca9yfnz.example", b = "1mu70dxh.example";
    const m = new AuthorityMatcher();
    m.add(a, 0);
    expect(m.matchRaw(String.UTF8.encode(a))).toBe(0);
    expect(m.matchRaw(String.UTF8.encode(b))).toBe(-1);
    expect(m.matchRaw(String.UTF8.encode(a))).toBe(0);
    expect(m.cacheSize()).toBe(1);
  });

  it("matches nothing for an authority with bytes outside ASCII (Envoy answers 400 to those)", () => {
    const m = new AuthorityMatcher();
    m.add("*.payments.example", 1);
    m.add("pay.example", 2);
    const raw = (prefix: string, byte: u8, suffix: string): ArrayBuffer => {
      const a = String.UTF8.encode(prefix);
      const b = String.UTF8.encode(suffix);
      const out = new ArrayBuffer(a.byteLength + 1 + b.byteLength);
      memory.copy(changetype<usize>(out), changetype<usize>(a), a.byteLength);
      store<u8>(changetype<usize>(out) + a.byteLength, byte);
      memory.copy(changetype<usize>(out) + a.byteLength + 1, changetype<usize>(b), b.byteLength);
      return out;
    };
    expect(m.matchRaw(raw("", 0xe9, ".payments.example"))).toBe(-1);
    expect(m.matchRaw(raw("pay.example", 0xe9, ""))).toBe(-1);
    expect(m.matchRaw(raw("x", 0x80, ".payments.example:80"))).toBe(-1);
    // the same authority in ASCII still matches
    expect(m.matchRaw(String.UTF8.encode("e.payments.example"))).toBe(1);
  });

  it("bounds the cache in bytes and never caches absurdly long authorities", () => {
    const m = new AuthorityMatcher();
    m.add("*.example", 1);
    // 60 KB authorities: matched correctly, never cached.
    const pad = "x".repeat(60000);
    for (let i = 0; i < 20; i++) {
      expect(m.matchRaw(String.UTF8.encode(i.toString() + pad + ".example"))).toBe(1);
    }
    expect(m.cacheSize()).toBe(0);
    expect(m.cacheBytesUsed()).toBe(0);
    // Just under the cut-off: cached, and the byte budget holds whatever their number.
    const mid = "y".repeat(MAX_CACHED_AUTHORITY_BYTES - 20);
    for (let i = 0; i < 3000; i++) {
      expect(m.matchRaw(String.UTF8.encode(i.toString() + mid + ".example"))).toBe(1);
      expect(m.cacheBytesUsed()).toBeLessThanOrEqual(CACHE_BUDGET_BYTES);
    }
    expect(m.cacheSize()).toBeGreaterThan(0);
    expect(m.cacheSize()).toBeLessThan(CACHE_BUDGET_BYTES / MAX_CACHED_AUTHORITY_BYTES + 1);
  });

  it("matches with many wildcards by label lookup (longest suffix first)", () => {
    const m = new AuthorityMatcher();
    for (let i = 0; i < 10000; i++) m.add("*.w" + i.toString() + ".example", i);
    m.add("*.example", -7);
    expect(m.match("a.w9999.example")).toBe(9999);
    expect(m.match("a.b.w17.example:80")).toBe(17);
    expect(m.match("a.other.example")).toBe(-7);
    expect(m.match("w17.example")).toBe(-7);
  });
});

const ROUTES_CFG = '{"agent":{"cluster":"a"},"link":{"services":[' +
    '{"authorities":["payment-service.prod.svc.cluster.local","payment-service"],"peer":"cloud-b"},' +
    '{"authorities":["*.pay.example"],"peer":"cloud-c"}]},' +
    '"loadAware":{"services":[{"authorities":["*.example","inference.prod.svc.cluster.local"],"service":"llm"},' +
    '{"authorities":["api.pay.example"],"service":"api"}]}}';

describe("routes (one lookup per request)", () => {
  it("maps every form Envoy routes to the service to the same link service", () => {
    const r = parseConfig(ROUTES_CFG);
    expect(r.error).toBe("");
    const t = buildRoutes(r.config!);
    const forms = ["payment-service.prod.svc.cluster.local", "payment-service.prod.svc.cluster.local:80",
      "payment-service.prod.svc.cluster.local:80:80", "payment-service.prod.svc.cluster.local:a:b",
      "PAYMENT-SERVICE.prod.svc.cluster.local.", "payment-service.prod", "payment-service.prod:8080",
      "payment-service.prod.svc", "payment-service.prod.svc.cluster", "payment-service", "payment-service:80"];
    for (let i = 0; i < forms.length; i++) {
      const route = t.match(String.UTF8.encode(forms[i]));
      expect(route).toBeGreaterThanOrEqual(0, forms[i]);
      expect(t.link[route]).toBe(0, forms[i]);
      expect(t.loadAware[route]).toBe(NO_SERVICE, forms[i]);
    }
    expect(t.match(String.UTF8.encode("payment-service.other"))).toBe(-1);
  });

  it("keeps each list's own precedence across the combined lookup", () => {
    const t = buildRoutes(parseConfig(ROUTES_CFG).config!);
    // api.pay.example: link by wildcard *.pay.example (service 1), load-aware by exact (service 1)
    let route = t.match(String.UTF8.encode("api.pay.example"));
    expect(t.link[route]).toBe(1);
    expect(t.loadAware[route]).toBe(1);
    // web.pay.example: link *.pay.example, load-aware *.example (the longest of its own list)
    route = t.match(String.UTF8.encode("web.pay.example"));
    expect(t.link[route]).toBe(1);
    expect(t.loadAware[route]).toBe(0);
    // other.example: load-aware only
    route = t.match(String.UTF8.encode("other.example"));
    expect(t.link[route]).toBe(NO_SERVICE);
    expect(t.loadAware[route]).toBe(0);
    // derived short name of a load-aware authority
    route = t.match(String.UTF8.encode("inference.prod:8000"));
    expect(t.loadAware[route]).toBe(0);
  });

  it("lets a listed name win over a derived one", () => {
    const r = parseConfig('{"agent":{"cluster":"a"},"link":{"services":[' +
      '{"authorities":["a.ns.svc.cluster.local"],"peer":"p1"},{"authorities":["a.ns"],"peer":"p2"}]}}');
    const t = buildRoutes(r.config!);
    expect(t.link[t.match(String.UTF8.encode("a.ns"))]).toBe(1);
    expect(t.link[t.match(String.UTF8.encode("a.ns.svc"))]).toBe(0);
  });
});
