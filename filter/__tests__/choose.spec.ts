import {
  mg1WaitMs, healthScore, weightFor, candidateFrom, pick, Candidate, Plan,
  SKIP_NONE, SKIP_UNHEALTHY, SKIP_SATURATED, SKIP_SLOW, SKIP_STALE, SKIP_LINK,
  MODEL_CONDITIONAL, MODEL_MG1, PICKER_P2C, PICKER_BAND,
} from "../assembly/lib/choose";
import { InstanceState } from "../assembly/lib/snapshot";
import { Rng } from "../assembly/lib/inflight";

function inst(addr: string, rho: f32, esMs: f32, es2: f32, queue: f32, slots: f32): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true;
  s.rho = rho; s.esMs = esMs; s.es2Ms2 = es2; s.queueDepth = queue; s.slots = slots;
  s.p99Ms = 100; s.baselineP99Ms = 100; s.dataAgeMs = 0;
  return s;
}

function cand(s: InstanceState, model: i32 = MODEL_CONDITIONAL): Candidate { return candidateFrom(s, model, 5000, 0, false); }

describe("mg1WaitMs", () => {
  it("matches hand-computed Pollaczek–Khinchine values (time in system, ms)", () => {
    // exponential service (E[S²] = 2E[S]²), rho 0.8, E[S] 10: M/M/1 sojourn E[S]/(1-rho) = 50
    expect(mg1WaitMs(0.8, 10, 200)).toBeCloseTo(50);
    // rho 0.5, E[S] 100, E[S²] 20000: 0.5·20000/(2·100·0.5) + 100 = 200
    expect(mg1WaitMs(0.5, 100, 20000)).toBeCloseTo(200);
    // deterministic service (E[S²] = E[S]²), rho 0.5: M/D/1 = E[S]·(1 + rho/(2(1-rho))) = 15
    expect(mg1WaitMs(0.5, 10, 100)).toBeCloseTo(15);
    // idle: just E[S]; E[S²] below E[S]² is impossible and raised to E[S]²
    expect(mg1WaitMs(0, 50, 5000)).toBeCloseTo(50);
    expect(mg1WaitMs(0.5, 10, 1)).toBeCloseTo(15);
    // capped at rho 0.99 to stay finite: 0.99·200/(2·10·0.01) + 10 = 1000
    expect(mg1WaitMs(1.5, 10, 200)).toBeCloseTo(1000);
    expect(mg1WaitMs(0.5, 0, 0)).toBe(0.0);
  });
});

describe("health score and weights", () => {
  it("keeps full weight up to 3x baseline and de-weights progressively", () => {
    expect(healthScore(300, 100)).toBe(1.0);
    expect(healthScore(375, 100)).toBeCloseTo(0.8);
    expect(healthScore(600, 100)).toBeCloseTo(0.5);
    expect(healthScore(100, 0)).toBe(1.0); // no baseline yet
    // P99 unknown (the agent sends NaN when no request finished in its window): judged again, not kept out
    expect(healthScore(NaN, 100)).toBe(1.0);
    expect(weightFor(0.8)).toBe(1.0);
    expect(weightFor(0.79)).toBeCloseTo(0.79);
    expect(weightFor(0.5)).toBeCloseTo(0.5);
    expect(weightFor(0.49)).toBe(0.0);
  });
});

describe("candidateFrom", () => {
  it("marks unhealthy, slow and link-degraded instances", () => {
    const sick = inst("a:1", 0.1, 10, 200, 0, 1); sick.healthy = false;
    expect(cand(sick).skip).toBe(SKIP_UNHEALTHY);
    const slow = inst("a:1", 0.1, 10, 200, 0, 1); slow.p99Ms = 601; slow.baselineP99Ms = 100;
    expect(cand(slow).skip).toBe(SKIP_SLOW);
    const lagging = inst("a:1", 0.1, 10, 200, 0, 1); lagging.p99Ms = 400; lagging.baselineP99Ms = 100;
    expect(cand(lagging).weight).toBeCloseTo(0.75);
    expect(cand(lagging).skip).toBe(SKIP_NONE);
    expect(candidateFrom(inst("a:1", 0.1, 10, 200, 0, 1), MODEL_CONDITIONAL, 5000, 0, true).skip).toBe(SKIP_LINK);
  });

  it("dates the data from the agent's scrape", () => {
    const s = inst("a:1", 0.1, 10, 200, 0, 1);
    s.dataAgeMs = 300;
    const c = candidateFrom(s, MODEL_CONDITIONAL, 1000, 5000, false);
    expect(c.scrapeAtMs).toBe(4700.0);
    expect(c.staleAtMs).toBe(5700.0);
  });

  it("adds the link round trip for instances in another cloud", () => {
    const local = cand(inst("a:1", 0.5, 100, 20000, 0, 1));
    const remote = candidateFrom(inst("b:1", 0.5, 100, 20000, 0, 1), MODEL_CONDITIONAL, 5000, 0, false, 35);
    expect(remote.baseWaitMs - local.baseWaitMs).toBeCloseTo(35);
  });

  it("costs E[S] + backlog·E[S]/c, with the M/G/1 term only in model mg1", () => {
    const c = cand(inst("a:1", 0.5, 100, 20000, 3, 2));
    const plan = new Plan([c]);
    expect(plan.waitMs(0, 0)).toBeCloseTo(100 + 3 * 50);
    expect(plan.waitMs(0, 2)).toBeCloseTo(100 + 5 * 50); // two more of ours since the scrape
    c.inflightAtSnapshot = 10;
    expect(new Plan([c]).waitMs(0, 0)).toBeCloseTo(100); // ours drained below the scrape: never negative
    const m = cand(inst("a:1", 0.5, 100, 20000, 3, 2), MODEL_MG1);
    expect(new Plan([m]).waitMs(0, 0)).toBeCloseTo(200 + 3 * 50);
  });
});

function run(cands: Array<Candidate>, inflight: Array<i32>, now: f64, picker: i32, band: f64, seed: u32): i32 {
  for (let i = 0; i < cands.length; i++) cands[i].slot = i;
  return pick(new Plan(cands), inflight, now, picker, band, new Rng(seed)).index;
}

describe("pick", () => {
  it("band 0 chooses the lowest expected time", () => {
    const cands = [cand(inst("a:1", 0.7, 100, 20000, 2, 1)), cand(inst("b:1", 0.2, 100, 20000, 0, 1)), cand(inst("c:1", 0.5, 100, 20000, 1, 1))];
    expect(run(cands, [0, 0, 0], 0, PICKER_BAND, 0, 7)).toBe(1);
  });

  it("p2c takes the cheaper of two random candidates, never the worst of three", () => {
    const cands = [cand(inst("a:1", 0.1, 100, 20000, 5, 1)), cand(inst("b:1", 0.1, 100, 20000, 0, 1)), cand(inst("c:1", 0.1, 100, 20000, 1, 1))];
    let sawB = false;
    for (let seed: u32 = 1; seed < 50; seed++) {
      const k = run(cands, [0, 0, 0], 0, PICKER_P2C, 0, seed);
      expect(k).not.toBe(0);
      if (k == 1) sawB = true;
    }
    expect(sawB).toBe(true);
  });

  it("p2c counts static skips on every request, as a full scan does, and never draws them", () => {
    const sa = inst("a:1", 0.1, 1, 2, 0, 1); sa.healthy = false;
    const sd = inst("d:1", 0.1, 1, 2, 0, 1); sd.p99Ms = 1000; // 10x the baseline: score 0.3, out as slow
    const cands = [cand(sa), cand(inst("b:1", 0.1, 40, 3200, 0, 1)), cand(inst("c:1", 0.1, 50, 5000, 0, 1)), cand(sd)];
    for (let i = 0; i < 4; i++) cands[i].slot = i;
    const plan = new Plan(cands);
    expect(plan.nElig).toBe(2);
    const rng = new Rng(4);
    for (let r = 0; r < 10; r++) {
      const p = pick(plan, [0, 0, 0, 0], 0, PICKER_P2C, 0, rng);
      expect(p.index).toBe(1); // the cheaper of the two eligible ones, every time
      expect(p.eligible).toBe(2);
    }
    expect(plan.skipped[SKIP_UNHEALTHY]).toBe(10);
    expect(plan.skipped[SKIP_SLOW]).toBe(10);
  });

  it("p2c leaves a saturated instance out while another has a free slot, however it is drawn", () => {
    // a: cheapest but saturated (rho 0.97, 4 of 4 busy); b, c: free slots
    const a = cand(inst("a:1", 0.97, 10, 200, 4, 4));
    const b = cand(inst("b:1", 0.5, 100, 20000, 1, 4));
    const c = cand(inst("c:1", 0.5, 120, 28800, 1, 4));
    a.slot = 0; b.slot = 1; c.slot = 2;
    const plan = new Plan([a, b, c]);
    const rng = new Rng(8);
    for (let r = 0; r < 60; r++) expect(pick(plan, [0, 0, 0], 0, PICKER_P2C, 0, rng).index).not.toBe(0);
    expect(plan.skipped[SKIP_SATURATED]).toBeGreaterThan(0); // a was drawn, and the full scan ruled
    // one slot of a frees up (we drained one below the scrape): no longer saturated, and cheapest
    let sawA = false;
    for (let r = 0; r < 60; r++) if (pick(plan, [-1, 0, 0], 0, PICKER_P2C, 0, rng).index == 0) sawA = true;
    expect(sawA).toBe(true);
  });

  it("skips saturated instances when a non-saturated one has a free slot", () => {
    // a: rho 0.97, 4 of 4 slots busy (saturated) but the cheapest; b: rho 0.5, a slot free
    const a = cand(inst("a:1", 0.97, 10, 200, 4, 4));
    const b = cand(inst("b:1", 0.5, 100, 20000, 3, 4));
    a.slot = 0; b.slot = 1;
    const plan = new Plan([a, b]);
    const p = pick(plan, [0, 0], 0, PICKER_BAND, 0, new Rng(1));
    expect(p.index).toBe(1);
    expect(plan.skipped[SKIP_SATURATED]).toBe(1);
  });

  it("keeps saturated instances in the ranking when the others are busy too", () => {
    const a = cand(inst("a:1", 0.97, 10, 200, 4, 4));
    const b = cand(inst("b:1", 0.5, 100, 20000, 4, 4)); // not saturated (rho) but no free slot
    a.slot = 0; b.slot = 1;
    const plan = new Plan([a, b]);
    const p = pick(plan, [0, 0], 0, PICKER_BAND, 0, new Rng(1));
    expect(p.index).toBe(0); // cheaper: 10 + 4·2.5 = 20 vs 100 + 4·25 = 200
    expect(p.eligible).toBe(2);
    expect(plan.skipped[SKIP_SATURATED]).toBe(0);
  });

  it("an unhealthy instance's idle slots do not count as free: the saturated one stays in the ranking", () => {
    const a = cand(inst("a:1", 0.97, 10, 200, 4, 4));
    const b = cand(inst("b:1", 0.5, 100, 20000, 4, 4)); // busy
    const down = inst("c:1", 0.1, 10, 200, 0, 4);
    down.healthy = false; // out of the choice, however idle it looks
    const c = cand(down);
    a.slot = 0; b.slot = 1; c.slot = 2;
    const plan = new Plan([a, b, c]);
    const p = pick(plan, [0, 0, 0], 0, PICKER_BAND, 0, new Rng(1));
    expect(p.index).toBe(0);
    expect(p.eligible).toBe(2);
    expect(plan.skipped[SKIP_SATURATED]).toBe(0);
  });

  it("the two pickers differ: band 0 always takes the cheapest, p2c the cheaper of two random ones", () => {
    // costs 10 < 20 < 30: p2c gives the middle one whenever the pair leaves the cheapest out (1 in 3)
    const a = cand(inst("a:1", 0.1, 10, 200, 0, 1));
    const b = cand(inst("b:1", 0.1, 20, 800, 0, 1));
    const c = cand(inst("c:1", 0.1, 30, 1800, 0, 1));
    a.slot = 0; b.slot = 1; c.slot = 2;
    const plan = new Plan([a, b, c]);
    const rng = new Rng(11);
    for (let r = 0; r < 60; r++) expect(pick(plan, [0, 0, 0], 0, PICKER_BAND, 0, rng).index).toBe(0);
    let middle = 0;
    for (let r = 0; r < 300; r++) {
      const i = pick(plan, [0, 0, 0], 0, PICKER_P2C, 0, rng).index;
      expect(i).not.toBe(2);
      if (i == 1) middle++;
    }
    expect(middle).toBeGreaterThan(60);
    expect(middle).toBeLessThan(140);
    expect(PICKER_BAND).not.toBe(PICKER_P2C);
  });

  it("when every one is saturated: none eligible to shed the request (reject-503), else price decides among them", () => {
    const a = cand(inst("a:1", 0.97, 10, 200, 4, 4));
    const b = cand(inst("b:1", 0.95, 10, 200, 1, 1));
    a.slot = 0; b.slot = 1;
    const plan = new Plan([a, b]);
    const kept = pick(plan, [0, 0], 0, PICKER_P2C, 0, new Rng(1)).index; // forward-degraded (the default)
    expect(kept).toBeGreaterThanOrEqual(0);
    expect(plan.skipped[SKIP_SATURATED]).toBe(0);
    plan.shedSaturated = true;
    expect(pick(plan, [0, 0], 0, PICKER_P2C, 0, new Rng(1)).index).toBe(-1);
    expect(plan.skipped[SKIP_SATURATED]).toBe(2);
    // the moment one has a free slot by our count (we drained 1 below the scrape), it is used
    expect(pick(plan, [0, -1], 0, PICKER_P2C, 0, new Rng(1)).index).toBe(1);
  });

  it("returns -1 when every instance is ineligible, counting the reasons", () => {
    const a = cand(inst("a:1", 0.97, 10, 200, 1, 1));
    const b = candidateFrom(inst("b:1", 0.1, 10, 200, 0, 1), MODEL_CONDITIONAL, 1000, 0, false); // stale from t=1000
    a.slot = 0; b.slot = 1;
    const plan = new Plan([a, b]);
    plan.shedSaturated = true; // reject-503: the saturated one is left out too
    const p = pick(plan, [0, 0], 1000, PICKER_P2C, 0.1, new Rng(3));
    expect(p.index).toBe(-1);
    expect(p.eligible).toBe(0);
    expect(plan.skipped[SKIP_SATURATED]).toBe(1);
    expect(plan.skipped[SKIP_STALE]).toBe(1);
  });

  it("spreads a burst instead of herding onto the best instance", () => {
    // Four equal instances; the data does not change, so only our own in-flight counts move.
    for (let picker = 0; picker < 2; picker++) {
      const cands = new Array<Candidate>();
      for (let i = 0; i < 4; i++) { const c = cand(inst("i" + i.toString() + ":1", 0.3, 50, 5000, 0, 1)); c.slot = i; cands.push(c); }
      const plan = new Plan(cands);
      const inflight: Array<i32> = [0, 0, 0, 0];
      const rng = new Rng(11);
      for (let r = 0; r < 40; r++) inflight[pick(plan, inflight, 0, picker, 0, rng).index]++;
      for (let i = 0; i < 4; i++) {
        expect(inflight[i]).toBeGreaterThanOrEqual(8);
        expect(inflight[i]).toBeLessThanOrEqual(12);
      }
    }
  });

  it("computes the same wait in the flat plan as per candidate", () => {
    const c = cand(inst("a:1", 0.5, 100, 20000, 3, 2), MODEL_MG1);
    c.inflightAtSnapshot = 1;
    const plan = new Plan([c]);
    expect(plan.waitMs(0, 4)).toBeCloseTo(200 + (3 + 4 - 1) * 50);
  });

  it("picks uniformly within the near-best band", () => {
    const cands = [cand(inst("a:1", 0.1, 100, 10000, 0, 1)), cand(inst("b:1", 0.1, 104, 10816, 0, 1)), cand(inst("c:1", 0.1, 300, 90000, 0, 1))];
    let seen0 = false, seen1 = false;
    for (let seed: u32 = 1; seed < 40; seed++) {
      const k = run(cands, [0, 0, 0], 0, PICKER_BAND, 0.1, seed);
      expect(k).toBeLessThan(2);
      if (k == 0) seen0 = true; else seen1 = true;
    }
    expect(seen0 && seen1).toBe(true);
    expect(run(cands, [0, 0, 0], 0, PICKER_BAND, 0.0, 5)).toBe(0);
  });
});
