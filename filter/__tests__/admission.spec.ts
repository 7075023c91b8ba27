// Admission and one unit (issue 20, causes 1 and 4): a capacity the servers never showed is not shed
// on; partial per-token data is filled from the fleet, never priced in another unit; an unknown or
// out-of-range LLM term never makes an instance cheaper; an invalid kvSeqs causes no 429.
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE } from "../assembly/lib/snapshot-llm";
import { Candidate, candidateFrom, Plan, MODEL_CONDITIONAL } from "../assembly/lib/choose";
import { LlmPlan, buildLlmPlan } from "../assembly/lib/choice/plan-llm";
import { RequestCost, CostParams, scoreRequest } from "../assembly/lib/choice/score-request";
import { pickForRequest, RequestPick } from "../assembly/lib/choose-request";
import { CRIT_STANDARD, CRIT_SHEDDABLE } from "../assembly/lib/criticality";
import { Rng } from "../assembly/lib/inflight";
import { PendingPrefill } from "../assembly/lib/pending-prefill";
import { LlmFixture, snapOf } from "./llm-fixture";

function inst(addr: string, q: f32, slots: u16, floor: bool = false): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.3; s.esMs = 100; s.es2Ms2 = 20000; s.queueDepth = q; s.slots = slots;
  s.slotsFloor = floor;
  return s;
}

function llm(addr: string, prefill: f32, decode: f32, kvSeqs: f32 = NaN, kv: f32 = 0.05): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = ["m"]; l.modelFlags = [MODEL_BASE];
  l.prefillMsPerToken = prefill; l.decodeMsPerToken = decode; l.kvCacheUsage = kv; l.kvSeqs = kvSeqs;
  return l;
}

/** The plans for instances `is` with LLM records `ls`. */
class Fleet extends LlmFixture {
  constructor(is: Array<InstanceState>, ls: Array<InstanceLlm>) { super(snapOf(is, ls)); }
}

function req(n: i32, prompt: f64, out: f64): RequestCost {
  const rc = new RequestCost();
  rc.cachedBlocks = new StaticArray<i32>(n);
  rc.promptTokens = prompt;
  rc.outTokens = out;
  rc.modelCol = 0;
  return rc;
}

describe("cold fleet: capacity unknown means admit (cause 1)", () => {
  it("slots that are only a floor (1 per instance, no KV capacity) never shed a burst of standard requests", () => {
    // eight cold instances: slots 1 inferred without queueing (the floor flag), no kvSeqs, KV nearly empty
    const is = new Array<InstanceState>(), ls = new Array<InstanceLlm>();
    for (let i = 0; i < 8; i++) {
      const a = "10.0.1." + (i + 1).toString() + ":80";
      is.push(inst(a, 0, 1, true));
      ls.push(llm(a, NaN, NaN));
    }
    const f = new Fleet(is, ls);
    const rc = req(8, 2048, 256);
    const out = new RequestPick();
    let shed = 0;
    // 1,024 requests before any snapshot moves: this proxy's own in-flight count is all the backlog
    for (let k = 0; k < 1024; k++) {
      pickForRequest(f.plan, f.lp, f.inflight, f.pending, <f64>k, 0, 0.1, new Rng(k + 1), rc, new CostParams(), CRIT_STANDARD, out);
      if (out.shed) shed++;
      else f.inflight[out.pick.index]++;
    }
    expect(shed).toBe(0);
    expect(out.overloaded).toBe(false);
  });

  it("a KV cache the server reports full is still pressure where slots are a floor", () => {
    const a = "10.0.1.1:80";
    const f = new Fleet([inst(a, 0, 1, true)], [llm(a, NaN, NaN, NaN, 0.99)]);
    const rc = req(1, 100, 10);
    const out = new RequestPick();
    pickForRequest(f.plan, f.lp, f.inflight, f.pending, 0, 0, 0.1, new Rng(1), rc, new CostParams(), CRIT_SHEDDABLE, out);
    expect(rc.pressureOf[0]).toBe(2.0);
    expect(out.shed).toBe(true);
  });
});

describe("one unit: partial per-token data (cause 4)", () => {
  it("an instance with first-token data but no finished request (prefill unknown) is priced in the same unit: pairs of 800-token requests are not all sent to it", () => {
    // A: decode known, prefill unknown; B: both known (prefill 6.5 ms/token: 5.2 s for 800 tokens)
    const a = "10.0.2.1:80", b = "10.0.2.2:80";
    let toA = 0;
    for (let p = 0; p < 24; p++) {
      const f = new Fleet([inst(a, 0, 8), inst(b, 0, 8)], [llm(a, NaN, 20), llm(b, 6.5, 20)]);
      const out = new RequestPick();
      for (let k = 0; k < 2; k++) {
        const rc = req(2, 800, 64);
        pickForRequest(f.plan, f.lp, f.inflight, f.pending, 0, 0, 0.1, new Rng(p * 2 + k + 1), rc, new CostParams(), CRIT_STANDARD, out);
        expect(out.shed).toBe(false);
        if (out.pick.index == 0) toA++;
        f.inflight[out.pick.index]++;
      }
    }
    expect(f0Filled(a, b)).toBe(1);
    // priced alike, the pair's second request goes where the first one's prefill is not ahead of it
    expect(toA).toBeLessThan(36);
    expect(toA).toBeGreaterThan(12);
  });

  it("a NaN or out-of-range LLM term never makes an instance cheaper than an identical measured one", () => {
    const a = "10.0.3.1:80", b = "10.0.3.2:80";
    const terms: Array<f32> = [NaN, 1e-9, -1, 1e9, <f32>Infinity];
    for (let k = 0; k < terms.length; k++) {
      const bad = terms[k];
      // prefill bad, decode bad, and both bad
      for (let which = 0; which < 3; which++) {
        const pf: f32 = which == 1 ? 0.1 : bad, dc: f32 = which == 0 ? 20 : bad;
        const f = new Fleet([inst(a, 0, 8), inst(b, 0, 8)], [llm(a, pf, dc), llm(b, 0.1, 20)]);
        const rc = req(2, 1000, 100);
        scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 0, rc, new CostParams());
        expect(f.plan.cost[0]).toBeGreaterThanOrEqual(f.plan.cost[1]);
      }
    }
  });

  it("an invalid kvSeqs causes no 429 while another instance is lightly loaded", () => {
    // A: 3 in flight on 1 configured slot, kvSeqs invalid (0.5), holds the prompt's prefix; B idle with kvSeqs 10
    const a = "10.0.4.1:80", b = "10.0.4.2:80";
    const f = new Fleet([inst(a, 3, 1), inst(b, 0, 8)], [llm(a, 1, 20, 0.5, 0.3), llm(b, 1, 20, 10, 0.05)]);
    const out = new RequestPick();
    let shed = 0;
    for (let k = 0; k < 200; k++) {
      const rc = req(2, 1000, 32);
      rc.cachedBlocks[0] = 4000;
      f.pending = new PendingPrefill();
      pickForRequest(f.plan, f.lp, f.inflight, f.pending, 0, 0, 0.1, new Rng(k + 1), rc, new CostParams(), CRIT_STANDARD, out);
      if (out.shed) shed++;
    }
    expect(shed).toBe(0);
  });
});

/** How many candidates' prefill term the plan filled for the A/B fleet of the pairs test. */
function f0Filled(a: string, b: string): i32 {
  return new Fleet([inst(a, 0, 8), inst(b, 0, 8)], [llm(a, NaN, 20), llm(b, 6.5, 20)]).lp.prefillFilled;
}
