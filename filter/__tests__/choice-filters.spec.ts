import { InstanceState } from "../assembly/lib/snapshot";
import { priceable, staticSkip, MIN_SERVICE_MS } from "../assembly/lib/choice/filter-static";
import { saturationThreshold } from "../assembly/lib/choice/filter-saturated";
import { SKIP_NONE, SKIP_UNHEALTHY, SKIP_LINK, SKIP_SLOW, SKIP_STALE, SKIP_SATURATED, SKIP_REASONS, skipName } from "../assembly/lib/choice/skip";
import { candidateFrom, Plan, pick, MODEL_CONDITIONAL, MODEL_MG1, PICKER_P2C, PICKER_BAND } from "../assembly/lib/choose";
import { Rng } from "../assembly/lib/inflight";

function good(): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = "10.0.0.1:80"; s.healthy = true;
  s.rho = 0.3; s.esMs = 10; s.es2Ms2 = 200; s.queueDepth = 1; s.slots = 1;
  s.p99Ms = 40; s.baselineP99Ms = 40;
  return s;
}

const BAD: StaticArray<f32> = [NaN, Infinity, -Infinity, -1, <f32>1e-40];

describe("filter-static: numbers that cannot be priced", () => {
  it("accepts sane numbers", () => {
    expect(priceable(good())).toBe(true);
    expect(staticSkip(good(), false, 1)).toBe(SKIP_NONE);
  });

  it("refuses esMs NaN, ±Inf, 0, negative, denormal and below MIN_SERVICE_MS", () => {
    for (let k = 0; k < BAD.length; k++) { const s = good(); s.esMs = BAD[k]; expect(priceable(s)).toBe(false); }
    const z = good(); z.esMs = 0; expect(priceable(z)).toBe(false);
    const t = good(); t.esMs = <f32>(MIN_SERVICE_MS / 2); expect(priceable(t)).toBe(false);
    const h = good(); h.esMs = 1e30; expect(priceable(h)).toBe(true); // huge is slow, not invalid
  });

  it("refuses queue and rho NaN, ±Inf or negative; 0 is fine", () => {
    for (let k = 0; k < 4; k++) {
      const q = good(); q.queueDepth = BAD[k]; expect(priceable(q)).toBe(false);
      const r = good(); r.rho = BAD[k]; expect(priceable(r)).toBe(false);
    }
    const q0 = good(); q0.queueDepth = 0; expect(priceable(q0)).toBe(true);
    const r0 = good(); r0.rho = 0; expect(priceable(r0)).toBe(true);
    const s = good(); s.slots = NaN; expect(priceable(s)).toBe(false);
  });

  it("orders the static reasons: unhealthy, link, unpriceable (counted as unhealthy), slow", () => {
    const sick = good(); sick.healthy = false;
    expect(staticSkip(sick, true, 0)).toBe(SKIP_UNHEALTHY);
    const nan = good(); nan.esMs = NaN;
    expect(staticSkip(nan, true, 0)).toBe(SKIP_LINK); // a remote instance behind a bad link: E[S] often unknown
    expect(staticSkip(nan, false, 0)).toBe(SKIP_UNHEALTHY);
    expect(staticSkip(good(), true, 0)).toBe(SKIP_LINK);
    expect(staticSkip(good(), false, 0)).toBe(SKIP_SLOW);
  });

  it("never gives a candidate a cost of 0 or NaN, and never picks an unpriceable one", () => {
    // one bad instance (idle, would be cheapest if priced at 0) among two sane ones, every field × value
    for (let field = 0; field < 3; field++) {
      for (let k = 0; k < BAD.length; k++) {
        const bad = good(); bad.addr = "10.0.0.9:80"; bad.queueDepth = 0;
        if (field == 0) bad.esMs = BAD[k]; else if (field == 1) bad.queueDepth = BAD[k]; else bad.rho = BAD[k];
        if (field > 0 && k == 4) continue; // a denormal queue or rho is just ~0: valid
        for (let model = 0; model < 2; model++) {
          const cands = [candidateFrom(bad, model, 5000, 0, false), candidateFrom(good(), model, 5000, 0, false), candidateFrom(good(), model, 5000, 0, false)];
          for (let i = 0; i < 3; i++) cands[i].slot = i;
          expect(cands[0].skip).toBe(SKIP_UNHEALTHY);
          const plan = new Plan(cands);
          for (let i = 0; i < 3; i++) {
            expect(isNaN(plan.waitMs(i, 0))).toBe(false);
            expect(plan.baseWaitMs[i] == plan.baseWaitMs[i] && plan.perItemMs[i] == plan.perItemMs[i]).toBe(true);
          }
          const rng = new Rng(3);
          for (let r = 0; r < 20; r++) {
            expect(pick(plan, [0, 0, 0], 0, PICKER_P2C, 0, rng).index).not.toBe(0);
            expect(pick(plan, [0, 0, 0], 0, PICKER_BAND, 0, rng).index).not.toBe(0);
          }
        }
      }
    }
  });

  it("prices esMs +Inf as never (not NaN), and an infinite E[S²] as E[S]² in mg1", () => {
    const inf = good(); inf.esMs = Infinity; inf.queueDepth = 0;
    expect(candidateFrom(inf, MODEL_MG1, 5000, 0, false).skip).toBe(SKIP_UNHEALTHY);
    const es2 = good(); es2.es2Ms2 = Infinity; es2.queueDepth = 0; es2.rho = 0.5;
    const c = candidateFrom(es2, MODEL_MG1, 5000, 0, false);
    expect(c.baseWaitMs).toBeCloseTo(15); // M/D/1 at rho 0.5, E[S] 10
  });
});

describe("skip reasons", () => {
  it("are distinct codes below SKIP_REASONS with distinct counter names", () => {
    const codes = [SKIP_UNHEALTHY, SKIP_SATURATED, SKIP_SLOW, SKIP_STALE, SKIP_LINK];
    const names = new Set<string>();
    for (let i = 0; i < codes.length; i++) {
      expect(codes[i]).toBeGreaterThan(SKIP_NONE);
      expect(codes[i]).toBeLessThan(SKIP_REASONS);
      for (let j = i + 1; j < codes.length; j++) expect(codes[i]).not.toBe(codes[j]);
      names.add(skipName(codes[i]));
    }
    expect(names.size).toBe(codes.length);
    expect(names.has("none")).toBe(false);
  });
});

describe("filter-saturated", () => {
  it("sets the threshold at slots from maxUtilization on (compared in f32), else never", () => {
    expect(saturationThreshold(<f64><f32>0.95, 0.95, 4)).toBe(4.0);
    expect(saturationThreshold(0.99, 0.95, 2)).toBe(2.0);
    expect(saturationThreshold(0.9, 0.95, 4)).toBe(Infinity);
  });

  it("needs ρ at the limit and no free slot by our live count", () => {
    const s = good(); s.rho = 0.97; s.queueDepth = 3; s.slots = 4; s.esMs = 1;
    const t = good(); t.rho = 0.2; t.queueDepth = 0; t.slots = 4; t.esMs = 100;
    const a = candidateFrom(s, MODEL_CONDITIONAL, 5000, 0, false); a.slot = 0;
    const b = candidateFrom(t, MODEL_CONDITIONAL, 5000, 0, false); b.slot = 1;
    const plan = new Plan([a, b]);
    expect(pick(plan, [0, 0], 0, PICKER_BAND, 0, new Rng(1)).index).toBe(0); // 3 of 4: a slot free
    expect(pick(plan, [1, 0], 0, PICKER_BAND, 0, new Rng(1)).index).toBe(1); // ours fills the 4th
    expect(plan.skipped[SKIP_SATURATED]).toBe(1);
  });

  it("a free instance priced out by in-band evidence (a black hole: errors, a free slot always) does not make the hot ones drop out", () => {
    const s = good(); s.rho = 0.97; s.queueDepth = 4; s.slots = 4; s.esMs = 100;
    const t = good(); t.rho = 0.2; t.queueDepth = 0; t.slots = 4; t.esMs = 2;  // its 2 ms 503s
    const a = candidateFrom(s, MODEL_CONDITIONAL, 5000, 0, false); a.slot = 0;
    const b = candidateFrom(t, MODEL_CONDITIONAL, 5000, 0, false); b.slot = 1;
    const plan = new Plan([a, b]);
    // in-band adj per slot [factor, queue override, queue cap, pile price ms] (ADJ_STRIDE): b's errors price it at 1000x
    const adj: Array<f64> = [1, NaN, Infinity, 0, 1000, NaN, Infinity, 0];
    for (let k = 0; k < 20; k++) expect(pick(plan, [0, 0], 0, PICKER_P2C, 0, new Rng(k), adj).index).toBe(0);
    // without the evidence b is a free slot, and the hot a drops out as before
    const none: Array<f64> = [1, NaN, Infinity, 0, 1, NaN, Infinity, 0];
    expect(pick(plan, [0, 0], 0, PICKER_P2C, 0, new Rng(1), none).index).toBe(1);
  });
});

// two healthy instances, ρ 0.97 and every slot busy by our count, and one left out by its P99
// alone (the agent's P99 7x its baseline), empty, whose scraped E[S] is `slowEs`
function saturatedFleet(slowEs: f32): Plan {
  const s = good(); s.rho = 0.97; s.queueDepth = 4; s.slots = 4; s.esMs = 100;
  const t = good(); t.rho = 0.97; t.queueDepth = 6; t.slots = 4; t.esMs = 100; t.addr = "10.0.0.2:80";
  const u = good(); u.rho = 0.2; u.queueDepth = 0; u.slots = 4; u.esMs = slowEs; u.addr = "10.0.0.3:80";
  u.p99Ms = 280; u.baselineP99Ms = 40;
  const a = candidateFrom(s, MODEL_CONDITIONAL, 5000, 0, false); a.slot = 0;
  const b = candidateFrom(t, MODEL_CONDITIONAL, 5000, 0, false); b.slot = 1;
  const c = candidateFrom(u, MODEL_CONDITIONAL, 5000, 0, false); c.slot = 2;
  expect(c.skip).toBe(SKIP_SLOW);
  return new Plan([a, b, c]);
}

describe("filter-saturated: every eligible instance saturated (the overflow)", () => {
  it("forwarded (the default): chosen by price, the P99-skipped instance at its own price -- not the all-ineligible fallback", () => {
    // the skipped one 10x slower by its scrape and one request of ours in it, in-band priced out
    // (factor 1000; empty and unpriced it would take one, as its price is its wait): never chosen
    const slow = saturatedFleet(1000);
    const adj: Array<f64> = [1, NaN, Infinity, 0, 1, NaN, Infinity, 0, 1000, NaN, Infinity, 0];
    for (let k = 0; k < 20; k++) {
      const p = pick(slow, [0, 0, 1], 0, PICKER_P2C, 0, new Rng(k), adj);
      expect(p.index).toBeGreaterThanOrEqual(0); // -1: forwarded degraded, where LEAST_REQUEST takes the empty #2
      expect(p.index).toBeLessThan(2);
    }
    expect(pick(slow, [0, 0, 1], 0, PICKER_BAND, 0, new Rng(1), adj).index).toBe(0); // the shorter queue
    expect(slow.skipped[SKIP_SATURATED]).toBe(0);
    // back to normal (its scrape still holds the episode's P99, nothing in-band against it): it takes the overflow
    const back = saturatedFleet(100);
    const none: Array<f64> = [1, NaN, Infinity, 0, 1, NaN, Infinity, 0, 1, NaN, Infinity, 0];
    expect(pick(back, [0, 0, 0], 0, PICKER_BAND, 0, new Rng(1), none).index).toBe(2);
    // stale data: not taken back
    expect(pick(back, [0, 0, 0], 1e9, PICKER_BAND, 0, new Rng(1), none).index).toBe(-1);
  });

  it("shed (allIneligible reject-503): none eligible, as before", () => {
    const plan = saturatedFleet(100);
    plan.shedSaturated = true;
    expect(pick(plan, [0, 0, 0], 0, PICKER_P2C, 0, new Rng(1)).index).toBe(-1);
    expect(plan.skipped[SKIP_SATURATED]).toBe(2);
  });
});

describe("filter-stale on the default picker's O(1) path", () => {
  it("never picks an instance whose data is stale, though nothing is saturated and it is cheapest", () => {
    const fresh1 = good(); fresh1.queueDepth = 3;
    const fresh2 = good(); fresh2.addr = "10.0.0.2:80"; fresh2.queueDepth = 3;
    const old = good(); old.addr = "10.0.0.3:80"; old.queueDepth = 0; old.dataAgeMs = 4000;
    // stalenessMs 5000, generated at 0: old is stale from t=1000, the others from t=5000
    const cands = [candidateFrom(old, MODEL_CONDITIONAL, 5000, 0, false), candidateFrom(fresh1, MODEL_CONDITIONAL, 5000, 0, false),
      candidateFrom(fresh2, MODEL_CONDITIONAL, 5000, 0, false)];
    for (let i = 0; i < 3; i++) cands[i].slot = i;
    const plan = new Plan(cands);
    const rng = new Rng(5);
    let sawOld = false;
    for (let r = 0; r < 50; r++) if (pick(plan, [0, 0, 0], 999, PICKER_P2C, 0, rng).index == 0) sawOld = true;
    expect(sawOld).toBe(true); // before it is stale it wins whenever drawn
    for (let r = 0; r < 50; r++) expect(pick(plan, [0, 0, 0], 1000, PICKER_P2C, 0, rng).index).not.toBe(0);
    expect(plan.skipped[SKIP_STALE]).toBe(50);
  });
});
