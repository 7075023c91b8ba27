// The LLM price and the other proxies' requests in flight (docs/inference-llm.md "One price in
// ms", docs/mesh.md "Mesh-wide in-flight"): their sends within the request's prefill time are
// prefill ahead of it; unknown counts are exactly today's price.
import { Inflight } from "../assembly/lib/inflight";
import { InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE } from "../assembly/lib/snapshot-llm";
import { RequestCost, CostParams, scoreRequest } from "../assembly/lib/choice/score-request";
import { LlmFixture, snapOf } from "./llm-fixture";

function inst(addr: string): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.3; s.esMs = 100; s.es2Ms2 = 20000; s.queueDepth = 0; s.slots = 8;
  s.slotsFloor = true;
  return s;
}

function llm(addr: string): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = ["m"]; l.modelFlags = [MODEL_BASE];
  l.prefillMsPerToken = 0.1; l.decodeMsPerToken = 12; l.kvCacheUsage = 0.05;
  return l;
}

function req(n: i32, prompt: f64, out: f64): RequestCost {
  const rc = new RequestCost();
  rc.cachedBlocks = new StaticArray<i32>(n);
  rc.promptTokens = prompt;
  rc.outTokens = out;
  rc.modelCol = 0;
  return rc;
}

/** An in-flight table whose slots 0 and 1 are `a` and `b` (the fixture's candidates' slots). */
function table(a: string, b: string): Inflight {
  const t = new Inflight();
  t.slotFor(a); t.slotFor(b);
  return t;
}

describe("Inflight.meshRecent", () => {
  it("is the other proxies' increase since the counts taken before the window, dated by when they were taken", () => {
    const t = table("a:1", "b:1");
    expect(t.meshRecent(0, 1000, 200)).toBe(0); // unknown: no answer yet
    t.meshInfoMs = 1000; t.setMesh(0, 2); t.record(1000);
    t.meshInfoMs = 1090; t.setMesh(0, 5); t.record(1100);
    // window (1050, 1150]: the reference is the counts taken at 1000 (2), now 5
    expect(t.meshRecent(0, 1150, 100)).toBe(3);
    // a window holding every recorded count: the oldest known one is the reference (counts short, never long)
    expect(t.meshRecent(0, 1150, 500)).toBe(3);
    // the counts in force were taken before the window: those sends are done with their prefill
    expect(t.meshRecent(0, 1300, 100)).toBe(0);
    // a slot the other proxies sent nothing to
    expect(t.meshRecent(1, 1150, 100)).toBe(0);
  });

  it("a decrease, expired counts and a slot without a known past are 0 (today's price)", () => {
    const t = table("a:1", "b:1");
    t.meshInfoMs = 1000; t.setMesh(0, 4); t.record(1000);
    t.meshInfoMs = 1090; t.setMesh(0, 1); t.record(1100);
    expect(t.meshRecent(0, 1150, 100)).toBe(0); // completions: not a prefill ahead
    t.setMesh(0, 6); t.record(1120);
    expect(t.meshRecent(0, 1150, 100)).toBe(2);
    t.forgetMesh();
    expect(t.meshRecent(0, 1150, 100)).toBe(0);
    // known now, unknown at every recorded tick before: no reference
    const u = table("a:1", "b:1");
    u.record(1000);
    u.meshInfoMs = 1090; u.setMesh(0, 3);
    expect(u.meshRecent(0, 1150, 100)).toBe(0);
    expect(u.meshRecent(-1, 1150, 100)).toBe(0);
    expect(u.meshRecent(7, 1150, 100)).toBe(0);
  });
});

describe("the LLM price counts the other proxies' recent sends", () => {
  it("two sends by other proxies within the prefill time are two of this request's prefills there, ahead of it", () => {
    const a = "10.0.9.1:80", b = "10.0.9.2:80";
    const f = new LlmFixture(snapOf([inst(a), inst(b)], [llm(a), llm(b)]));
    const t = table(a, b);
    t.meshInfoMs = 900; t.setMesh(0, 0); t.setMesh(1, 0); t.record(900);
    t.meshInfoMs = 980; t.setMesh(0, 2); t.record(1000);
    // 2,000 uncached tokens at 0.1 ms: 200 ms, the window
    const base = req(2, 2000, 64);
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, base, new CostParams());
    const c0 = f.plan.cost[0], c1 = f.plan.cost[1];
    expect(c0).toBe(c1); // no table: today's price, both alike
    const rc = req(2, 2000, 64);
    rc.mesh = t;
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, rc, new CostParams());
    expect(rc.meshOf[0]).toBeCloseTo(400);
    expect(rc.meshOf[1]).toBe(0);
    // 400 ms ahead, and the request's own 200 ms prefill delays the two behind it (queued ÷ whole)
    expect(f.plan.cost[0]).toBeCloseTo(c0 + 400 + 400);
    expect(f.plan.cost[1]).toBe(c1);
    // where the request's prefix is cached (100 blocks of 16 tokens: 400 tokens left, 40 ms) each
    // of those sends is priced as the request's own prefill there: a holder's other sends are
    // likely its prefix's hits, not misses (the window stays the whole prompt's 200 ms)
    const hit = req(2, 2000, 64);
    hit.mesh = t;
    hit.cachedBlocks[0] = 100;
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, hit, new CostParams());
    expect(hit.meshOf[0]).toBeCloseTo(80);
  });

  it("unknown or known-zero counts of the other proxies (one proxy: empty answers) give exactly today's price", () => {
    const a = "10.0.9.3:80", b = "10.0.9.4:80";
    const f = new LlmFixture(snapOf([inst(a), inst(b)], [llm(a), llm(b)]));
    f.pending.charge(0, 1000, 150);
    const base = req(2, 2000, 64);
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, base, new CostParams());
    const c0 = f.plan.cost[0], c1 = f.plan.cost[1];
    const unknown = table(a, b);
    unknown.record(1000);
    const zero = table(a, b);
    zero.meshInfoMs = 900; zero.setMesh(0, 0); zero.setMesh(1, 0); zero.record(900);
    zero.meshInfoMs = 990; zero.record(1000);
    const ts: Array<Inflight> = [unknown, zero];
    for (let k = 0; k < ts.length; k++) {
      const rc = req(2, 2000, 64);
      rc.mesh = ts[k];
      scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, rc, new CostParams());
      expect(f.plan.cost[0]).toBe(c0);
      expect(f.plan.cost[1]).toBe(c1);
    }
  });
});
