import {
  mg1WaitMs, healthScore, weightFor, candidateFrom, costMs, pick, Candidate, Plan,
  SKIP_NONE, SKIP_UNHEALTHY, SKIP_SATURATED, SKIP_SLOW, SKIP_STALE, SKIP_LINK, SKIP_REASONS,
} from "../assembly/lib/choose";
import { InstanceState } from "../assembly/lib/snapshot";

function inst(addr: string, rho: f32, esMs: f32, es2: f32, queue: f32, slots: f32): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true;
  s.rho = rho; s.esMs = esMs; s.es2Ms2 = es2; s.queueDepth = queue; s.slots = slots;
  s.p99Ms = 100; s.baselineP99Ms = 100; s.dataAgeMs = 0;
  return s;
}

function cand(s: InstanceState): Candidate { return candidateFrom(s, 0.95, 5000, 0, false); }

describe("mg1WaitMs", () => {
  it("matches hand-computed Pollaczek–Khinchine values", () => {
    // rho 0.5, E[S] 100 ms, E[S²] 20000 ms²: 0.5·20000/(2·0.5) + 100 = 10100
    expect(mg1WaitMs(0.5, 100, 20000)).toBeCloseTo(10100);
    // exponential service (E[S²] = 2E[S]²), rho 0.8, E[S] 10: 0.8·200/(0.4) + 10 = 410
    expect(mg1WaitMs(0.8, 10, 200)).toBeCloseTo(410);
    // idle: just E[S]
    expect(mg1WaitMs(0, 50, 5000)).toBeCloseTo(50);
    // E[S²] below E[S]² is impossible; it is raised to E[S]² (deterministic service)
    expect(mg1WaitMs(0.5, 10, 1)).toBeCloseTo(0.5 * 100 / 1.0 + 10);
    expect(mg1WaitMs(1.0, 10, 200)).toBe(Infinity);
  });
});

describe("health score and weights", () => {
  it("keeps full weight up to 3x baseline and de-weights progressively", () => {
    expect(healthScore(300, 100)).toBe(1.0);
    expect(healthScore(375, 100)).toBeCloseTo(0.8);
    expect(healthScore(600, 100)).toBeCloseTo(0.5);
    expect(healthScore(100, 0)).toBe(1.0); // no baseline yet
    expect(weightFor(0.8)).toBe(1.0);
    expect(weightFor(0.79)).toBeCloseTo(0.79);
    expect(weightFor(0.5)).toBeCloseTo(0.5);
    expect(weightFor(0.49)).toBe(0.0);
  });
});

describe("candidateFrom", () => {
  it("skips unhealthy, saturated, slow and link-degraded instances", () => {
    const sick = inst("a:1", 0.1, 10, 200, 0, 1); sick.healthy = false;
    expect(cand(sick).skip).toBe(SKIP_UNHEALTHY);
    expect(cand(inst("a:1", 0.95, 10, 200, 0, 1)).skip).toBe(SKIP_SATURATED);
    expect(cand(inst("a:1", 0.9499, 10, 200, 0, 1)).skip).toBe(SKIP_NONE);
    const slow = inst("a:1", 0.1, 10, 200, 0, 1); slow.p99Ms = 601; slow.baselineP99Ms = 100;
    expect(cand(slow).skip).toBe(SKIP_SLOW);
    const lagging = inst("a:1", 0.1, 10, 200, 0, 1); lagging.p99Ms = 400; lagging.baselineP99Ms = 100;
    expect(cand(lagging).weight).toBeCloseTo(0.75);
    expect(candidateFrom(inst("a:1", 0.1, 10, 200, 0, 1), 0.95, 5000, 0, true).skip).toBe(SKIP_LINK);
  });

  it("adds the link round trip for instances in another cloud", () => {
    const local = cand(inst("a:1", 0.5, 100, 20000, 0, 1));
    const remote = candidateFrom(inst("b:1", 0.5, 100, 20000, 0, 1), 0.95, 5000, 0, false, 35);
    expect(remote.baseWaitMs - local.baseWaitMs).toBeCloseTo(35);
  });

  it("adds the backlog term and divides by the weight", () => {
    const c = cand(inst("a:1", 0.5, 100, 20000, 3, 2));
    // 10100 + 3·100/2
    expect(costMs(c, 0)).toBeCloseTo(10250);
    // two more of ours in flight since the snapshot
    expect(costMs(c, 2)).toBeCloseTo(10350);
    // ours drained below the snapshot: backlog never negative
    c.inflightAtSnapshot = 10;
    expect(costMs(c, 0)).toBeCloseTo(10100);
    const d = cand(inst("b:1", 0.5, 100, 20000, 0, 1));
    d.weight = 0.5;
    expect(costMs(d, 0)).toBeCloseTo(20200);
  });
});

function run(cands: Array<Candidate>, inflight: Array<i32>, now: f64, band: f64, rand: f64): i32 {
  return pick(new Plan(cands), inflight, now, band, rand).index;
}

describe("pick", () => {
  it("chooses the lowest expected wait", () => {
    const cands = [cand(inst("a:1", 0.7, 100, 20000, 2, 1)), cand(inst("b:1", 0.2, 100, 20000, 0, 1)), cand(inst("c:1", 0.5, 100, 20000, 1, 1))];
    for (let i = 0; i < 3; i++) cands[i].slot = i;
    expect(run(cands, [0, 0, 0], 0, 0, 0.99)).toBe(1);
  });

  it("returns -1 when every instance is ineligible, counting the reasons", () => {
    const a = cand(inst("a:1", 0.97, 10, 200, 0, 1));
    const b = candidateFrom(inst("b:1", 0.1, 10, 200, 0, 1), 0.95, 1000, 0, false); // stale after t=1000
    b.slot = 1;
    const plan = new Plan([a, b]);
    const p = pick(plan, [0, 0], 1000, 0.1, 0.5);
    expect(p.index).toBe(-1);
    expect(p.eligible).toBe(0);
    expect(plan.skipped[SKIP_SATURATED]).toBe(1);
    expect(plan.skipped[SKIP_STALE]).toBe(1);
  });

  it("spreads a burst instead of herding onto the best instance", () => {
    // Four equal instances; the snapshot is stale, so only our own in-flight counts move.
    const cands = new Array<Candidate>();
    for (let i = 0; i < 4; i++) { const c = cand(inst("i" + i.toString() + ":1", 0.3, 50, 5000, 0, 1)); c.slot = i; cands.push(c); }
    const inflight: Array<i32> = [0, 0, 0, 0];
    for (let r = 0; r < 40; r++) {
      const k = run(cands, inflight, 0, 0, 0.0);
      inflight[k]++;
    }
    for (let i = 0; i < 4; i++) expect(inflight[i]).toBe(10);
  });

  it("computes the same wait in the flat plan as per candidate", () => {
    const c = cand(inst("a:1", 0.5, 100, 20000, 3, 2));
    c.inflightAtSnapshot = 1;
    const plan = new Plan([c]);
    expect(plan.waitMs(0, 4)).toBeCloseTo(costMs(c, 4));
    expect(plan.waitMs(0, 4)).toBeCloseTo(10100 + (3 + 4 - 1) * 50);
  });

  it("picks uniformly within the near-best band", () => {
    const cands = [cand(inst("a:1", 0.1, 100, 10000, 0, 1)), cand(inst("b:1", 0.1, 104, 10816, 0, 1)), cand(inst("c:1", 0.1, 300, 90000, 0, 1))];
    for (let i = 0; i < 3; i++) cands[i].slot = i;
    expect(run(cands, [0, 0, 0], 0, 0.1, 0.0)).toBe(0);
    expect(run(cands, [0, 0, 0], 0, 0.1, 0.99)).toBe(1);
    expect(run(cands, [0, 0, 0], 0, 0.0, 0.99)).toBe(0);
  });
});
