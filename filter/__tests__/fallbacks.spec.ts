// The fallback order after a pick (lib/choice/fallbacks.ts): the next-best local instances by the
// pick's own price, for Envoy's override_host to walk on retries.
import { InstanceState } from "../assembly/lib/snapshot";
import { candidateFrom, Candidate, Plan, pick, priceAll, rankFallbacks, MAX_FALLBACKS, MODEL_CONDITIONAL, PICKER_P2C, PICKER_BAND } from "../assembly/lib/choose";
import { Rng } from "../assembly/lib/inflight";
import { parseConfig } from "../assembly/lib/config";

function inst(addr: string, esMs: f32, queue: f32, peer: string = ""): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.peer = peer;
  s.rho = 0.3; s.esMs = esMs; s.es2Ms2 = esMs * esMs * 2; s.queueDepth = queue; s.slots = 4;
  s.p99Ms = 100; s.baselineP99Ms = 100; s.dataAgeMs = 0;
  return s;
}

function planOf(states: Array<InstanceState>, linkDegraded: bool = false): Plan {
  const cs = new Array<Candidate>();
  for (let i = 0; i < states.length; i++) {
    const c = candidateFrom(states[i], MODEL_CONDITIONAL, 5000, 0, linkDegraded && states[i].peer.length > 0);
    c.slot = i;
    cs.push(c);
  }
  return new Plan(cs);
}

function zeros(n: i32): Array<i32> { const a = new Array<i32>(n); for (let i = 0; i < n; i++) a[i] = 0; return a; }

describe("rankFallbacks", () => {
  it("lists the other local instances cheapest first, after any pick, up to max", () => {
    // costs (E[S] + backlog·E[S]/c): a 10, b 40, c 20, d 30
    const plan = planOf([inst("a:1", 10, 0), inst("b:1", 10, 12), inst("c:1", 10, 4), inst("d:1", 10, 8)]);
    const inflight = zeros(4);
    priceAll(plan, inflight.dataStart, 0);
    const out = new StaticArray<i32>(MAX_FALLBACKS);
    expect(rankFallbacks(plan, 0, 8, out)).toBe(3);
    expect(out[0]).toBe(2); expect(out[1]).toBe(3); expect(out[2]).toBe(1);
    // a pick that is not the cheapest (p2c drew two dear ones): the cheapest leads the fallbacks
    expect(rankFallbacks(plan, 3, 2, out)).toBe(2);
    expect(out[0]).toBe(0); expect(out[1]).toBe(2);
    expect(rankFallbacks(plan, 0, 0, out)).toBe(0);
  });

  it("counts our in-flight requests: an instance we just loaded falls behind", () => {
    const plan = planOf([inst("a:1", 10, 0), inst("b:1", 10, 0), inst("c:1", 10, 0)]);
    const inflight = zeros(3);
    inflight[1] = 8; // b: 8 of ours in flight → 10 + 8·2.5 = 30
    priceAll(plan, inflight.dataStart, 0);
    const out = new StaticArray<i32>(MAX_FALLBACKS);
    expect(rankFallbacks(plan, 0, 2, out)).toBe(2);
    expect(out[0]).toBe(2); expect(out[1]).toBe(1);
  });

  it("never lists a remote instance, an unhealthy, a stale or a saturated one", () => {
    const sick = inst("sick:1", 1, 0); sick.healthy = false;
    const old = inst("old:1", 1, 0); old.dataAgeMs = 10000; // stale at nowMs 0 (stalenessMs 5000)
    const hot = inst("hot:1", 1, 0); hot.rho = 0.99; hot.slots = 1;
    const plan = planOf([inst("a:1", 10, 0), inst("remote:1", 1, 0, "cloud-b"), sick, old, hot, inst("b:1", 50, 0)]);
    const inflight = zeros(6);
    inflight[4] = 1; // hot: its one slot is taken → saturated
    priceAll(plan, inflight.dataStart, 0);
    const out = new StaticArray<i32>(MAX_FALLBACKS);
    expect(rankFallbacks(plan, 0, 8, out)).toBe(1);
    expect(out[0]).toBe(5);
  });

  it("keeps ties in plan order and lists every candidate once", () => {
    const plan = planOf([inst("a:1", 10, 0), inst("b:1", 10, 0), inst("c:1", 10, 0), inst("d:1", 10, 0)]);
    priceAll(plan, zeros(4).dataStart, 0);
    const out = new StaticArray<i32>(MAX_FALLBACKS);
    expect(rankFallbacks(plan, 2, 8, out)).toBe(3);
    expect(out[0]).toBe(0); expect(out[1]).toBe(1); expect(out[2]).toBe(3);
  });

  it("after a full scoring pass (band picker) uses the pass's prices; after the O(1) path priceAll gives the same order", () => {
    const states = [inst("a:1", 10, 0), inst("b:1", 10, 12), inst("c:1", 10, 4), inst("d:1", 10, 8)];
    const inflight = zeros(4);
    const banded = planOf(states);
    const pb = pick(banded, inflight, 0, PICKER_BAND, 0, new Rng(3));
    expect(pb.scored).toBe(true);
    expect(pb.index).toBe(0);
    const out = new StaticArray<i32>(MAX_FALLBACKS);
    expect(rankFallbacks(banded, pb.index, 3, out)).toBe(3);
    const a0 = out[0], a1 = out[1], a2 = out[2];
    const fast = planOf(states);
    const pf = pick(fast, inflight, 0, PICKER_P2C, 0, new Rng(3));
    expect(pf.scored).toBe(false); // two draws priced, the others not
    priceAll(fast, inflight.dataStart, 0);
    const out2 = new StaticArray<i32>(MAX_FALLBACKS);
    expect(rankFallbacks(fast, 0, 3, out2)).toBe(3);
    expect(out2[0]).toBe(a0); expect(out2[1]).toBe(a1); expect(out2[2]).toBe(a2);
  });
});

describe("config: fallbacks and remoteEndpointHeader", () => {
  const base = '{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{';
  it("reads fallbacks 0..MAX_FALLBACKS (default 0) and refuses others naming the field", () => {
    expect(MAX_FALLBACKS).toBe(8);
    const d = parseConfig(base + '"services":[{"authorities":["a.b"],"service":"s"}]}}');
    expect(d.error).toBe("");
    expect(d.config!.loadAware.services[0].fallbacks).toBe(0);
    expect(d.config!.loadAware.remoteEndpointHeader).toBe("");
    const ok = parseConfig(base + '"services":[{"authorities":["a.b"],"service":"s","fallbacks":8}]}}');
    expect(ok.error).toBe("");
    expect(ok.config!.loadAware.services[0].fallbacks).toBe(8);
    expect(parseConfig(base + '"services":[{"authorities":["a.b"],"service":"s","fallbacks":9}]}}').error.startsWith("loadAware.services[0].fallbacks" + ": ")).toBe(true);
    expect(parseConfig(base + '"services":[{"authorities":["a.b"],"service":"s","fallbacks":"2"}]}}').error.startsWith("loadAware.services[0].fallbacks" + ": ")).toBe(true);
  });
  it("reads remoteEndpointHeader; it must be a header name distinct from the other filter-owned ones", () => {
    const ok = parseConfig(base + '"remoteEndpointHeader":"x-switchyard-remote-endpoint","services":[]}}');
    expect(ok.error).toBe("");
    expect(ok.config!.loadAware.remoteEndpointHeader).toBe("x-switchyard-remote-endpoint");
    expect(parseConfig(base + '"remoteEndpointHeader":"X-Up","services":[]}}').error.startsWith("loadAware.remoteEndpointHeader" + ": ")).toBe(true);
    expect(parseConfig(base + '"remoteEndpointHeader":"","services":[]}}').error.startsWith("loadAware.remoteEndpointHeader" + ": ")).toBe(true);
    expect(parseConfig(base + '"remoteEndpointHeader":"x-switchyard-endpoint","services":[]}}').error.startsWith("loadAware.remoteEndpointHeader" + ": ")).toBe(true);
  });
});
