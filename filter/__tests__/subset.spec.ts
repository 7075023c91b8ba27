// The Inference Extension's endpoint subset (lib/choice/subset.ts) and objective priorities
// (lib/criticality.ts criticalityOfPriority, request.objectives).
import { InstanceState } from "../assembly/lib/snapshot";
import { candidateFrom, Candidate, Plan, pick, subsetMask, rankFallbacks, MAX_FALLBACKS, MODEL_CONDITIONAL, PICKER_P2C, PICKER_BAND } from "../assembly/lib/choose";
import { Rng } from "../assembly/lib/inflight";
import { criticalityOfPriority, resolveCriticality, CRIT_CRITICAL, CRIT_STANDARD, CRIT_SHEDDABLE } from "../assembly/lib/criticality";
import { parseConfig } from "../assembly/lib/config";

function inst(addr: string, esMs: f32, queue: f32): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true;
  s.rho = 0.3; s.esMs = esMs; s.es2Ms2 = esMs * esMs * 2; s.queueDepth = queue; s.slots = 4;
  s.p99Ms = 100; s.baselineP99Ms = 100; s.dataAgeMs = 0;
  return s;
}
function planOf(states: Array<InstanceState>): Plan {
  const cs = new Array<Candidate>();
  for (let i = 0; i < states.length; i++) { const c = candidateFrom(states[i], MODEL_CONDITIONAL, 5000, 0, false); c.slot = i; cs.push(c); }
  return new Plan(cs);
}
function zeros(n: i32): Array<i32> { const a = new Array<i32>(n); for (let i = 0; i < n; i++) a[i] = 0; return a; }

describe("subsetMask", () => {
  it("marks the listed candidates; spaces and empty entries ignored; an address that is no candidate marks nothing", () => {
    const plan = planOf([inst("10.0.0.1:80", 10, 0), inst("10.0.0.2:80", 10, 0), inst("10.0.0.3:80", 10, 0)]);
    const m = new StaticArray<u8>(3);
    expect(subsetMask(plan, " 10.0.0.3:80 ,,10.0.0.1:80", m)).toBe(2);
    expect(m[0]).toBe(1); expect(m[1]).toBe(0); expect(m[2]).toBe(1);
    expect(subsetMask(plan, "10.9.9.9:80,10.0.0.2:8", m)).toBe(0);
    expect(subsetMask(plan, "", m)).toBe(0);
    expect(subsetMask(plan, "10.0.0.2:80,10.0.0.2:80", m)).toBe(1);
  });
});

describe("pick with a subset", () => {
  it("never leaves the subset, even when a cheaper instance is outside it (p2c and band)", () => {
    // a is by far the cheapest, but only b and c are allowed
    const plan = planOf([inst("a:1", 1, 0), inst("b:1", 50, 0), inst("c:1", 20, 0)]);
    const m = new StaticArray<u8>(3);
    subsetMask(plan, "b:1,c:1", m);
    const rng = new Rng(7);
    for (let k = 0; k < 50; k++) {
      const p = pick(plan, zeros(3), 0, PICKER_P2C, 0.1, rng, null, m);
      expect(p.index == 1 || p.index == 2).toBe(true);
      expect(p.probe).toBe(false);
      expect(p.eligible).toBe(2);
    }
    const pb = pick(plan, zeros(3), 0, PICKER_BAND, 0, rng, null, m);
    expect(pb.index).toBe(2);
    // and its fallbacks stay inside too
    const out = new StaticArray<i32>(MAX_FALLBACKS);
    expect(rankFallbacks(plan, pb.index, 8, out)).toBe(1);
    expect(out[0]).toBe(1);
  });
  it("a subset with nothing eligible gives no pick (the plugin answers 503), never one outside it", () => {
    const sick = inst("b:1", 10, 0); sick.healthy = false;
    const plan = planOf([inst("a:1", 1, 0), sick]);
    const m = new StaticArray<u8>(2);
    subsetMask(plan, "b:1", m);
    expect(pick(plan, zeros(2), 0, PICKER_P2C, 0.1, new Rng(1), null, m).index).toBe(-1);
    subsetMask(plan, "z:1", m);
    expect(pick(plan, zeros(2), 0, PICKER_BAND, 0, new Rng(1), null, m).index).toBe(-1);
  });
});

describe("objective priorities", () => {
  it("map as llm-d's InferenceObjective: negative sheddable, 0 standard, positive critical", () => {
    expect(criticalityOfPriority(-1)).toBe(CRIT_SHEDDABLE);
    expect(criticalityOfPriority(-1000)).toBe(CRIT_SHEDDABLE);
    expect(criticalityOfPriority(0)).toBe(CRIT_STANDARD);
    expect(criticalityOfPriority(1)).toBe(CRIT_CRITICAL);
  });
  it("rank: criticality header, then the objective, then the model, then the service default", () => {
    expect(resolveCriticality("critical", CRIT_STANDARD, CRIT_STANDARD, CRIT_SHEDDABLE)).toBe(CRIT_CRITICAL);
    expect(resolveCriticality("bogus", CRIT_CRITICAL, CRIT_STANDARD, CRIT_SHEDDABLE)).toBe(CRIT_SHEDDABLE);
    expect(resolveCriticality(null, CRIT_CRITICAL, CRIT_STANDARD, -1)).toBe(CRIT_CRITICAL);
    expect(resolveCriticality(null, -1, CRIT_STANDARD, -1)).toBe(CRIT_STANDARD);
  });
  it("config: objectives and the gateway options are read; bad ones refused naming the field", () => {
    const pre = '{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["a.b"],"service":"s"';
    const rq = ',"request":{"allowOnHeadersStopIteration":true,';
    const ok = parseConfig(pre + ',"gatewayDestination":true,"gatewaySubset":true' + rq + '"objectives":[{"name":"batch","priority":-1},{"name":"chat","priority":10}]}}]}}');
    expect(ok.error).toBe("");
    const svc = ok.config!.loadAware.services[0];
    expect(svc.gatewayDestination).toBe(true);
    expect(svc.gatewaySubset).toBe(true);
    const o = svc.request!.objectives;
    expect(o.get("batch")).toBe(CRIT_SHEDDABLE);
    expect(o.get("chat")).toBe(CRIT_CRITICAL);
    expect(svc.request!.objectiveHeader).toBe("x-gateway-inference-objective");
    expect(svc.request!.maxBodyBytes).toBe(524288);
    expect(parseConfig(pre + ',"gatewaySubset":"yes"}]}}').error.startsWith("loadAware.services[0].gatewaySubset: ")).toBe(true);
    expect(parseConfig(pre + rq + '"objectives":[{"name":"x","priority":1},{"name":"x","priority":2}]}}]}}').error
      .startsWith("loadAware.services[0].request.objectives[1].name: ")).toBe(true);
    expect(parseConfig(pre + rq + '"objectives":[{"name":"x"}]}}]}}').error.startsWith("loadAware.services[0].request.objectives[0].priority: ")).toBe(true);
    expect(parseConfig(pre + rq + '"objectiveHeader":"x-switchyard-criticality"}}]}}').error.startsWith("loadAware.services[0].request.objectiveHeader: ")).toBe(true);
  });
});
