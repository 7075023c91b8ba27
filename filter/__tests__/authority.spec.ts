import { AuthorityMatcher, normalizeHost, checkPattern } from "../assembly/lib/authority";

describe("normalizeHost", () => {
  it("lowercases and drops the port and a trailing dot", () => {
    expect(normalizeHost("Payment.Example:8080")).toBe("payment.example");
    expect(normalizeHost("payment.example.")).toBe("payment.example");
    expect(normalizeHost("payment.example.:80")).toBe("payment.example");
    expect(normalizeHost("[::1]:8080")).toBe("[::1]");
    expect(normalizeHost("10.0.0.1:9000")).toBe("10.0.0.1");
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
    expect(m.cacheSize()).toBeLessThanOrEqual(4096);
    expect(m.matchRaw(String.UTF8.encode("a.example"))).toBe(3);
  });
});
