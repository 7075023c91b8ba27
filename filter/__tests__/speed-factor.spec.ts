// A speed factor per instance on the pool's per-token terms (plan-llm.ts speedFactors, baseSpeeds;
// docs/benchmarks/llm-r9c.md): an instance whose own measured prefill rate stands out of its base
// model's spread is priced at (part of) its own rate, on identical workers every factor is 1, and
// nothing unknown or faster-looking is made cheaper (docs/contracts.md).
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE } from "../assembly/lib/snapshot-llm";
import { speedFactors, SPEED_SIGMAS, SPEED_NOISE_FLOOR } from "../assembly/lib/choice/plan-llm";
import { RequestCost, CostParams, scoreRequest } from "../assembly/lib/choice/score-request";
import { LlmFixture } from "./llm-fixture";

function inst(addr: string): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.3; s.esMs = 1000; s.es2Ms2 = 2e6;
  s.queueDepth = 0; s.slots = 40; s.slotsFloor = true;
  return s;
}

function llm(addr: string, model: string, pf: f32): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = [model]; l.modelFlags = [MODEL_BASE]; l.maxLoras = 0; l.kvCacheUsage = 0.1;
  l.prefillMsPerToken = pf; l.decodeMsPerToken = 12; l.decodeIdleMs = 10.8; l.decodeMsPerSeq = 0.2;
  return l;
}

/** bench/llm-routing's fleet at 2× overload (seed 2, 40 s, as the agent published it): llama on 0-5,
 *  4 and 5 an older generation (1.6× step time); mistral on 6-7, its KV cache under pressure. */
function mixedSnap(): Snapshot {
  const s = new Snapshot();
  const pf: f32[] = [0.089, 0.090, 0.087, 0.088, 0.162, 0.160, 0.124, 0.108];
  for (let i = 0; i < 8; i++) {
    const a = "10.0.0." + (i + 1).toString() + ":80";
    s.instances.push(inst(a));
    s.llm.push(llm(a, i < 6 ? "llama" : "mistral", pf[i]));
  }
  return s;
}

function arr(v: f64[]): StaticArray<f64> {
  const t = new StaticArray<f64>(v.length);
  for (let i = 0; i < v.length; i++) t[i] = v[i];
  return t;
}

describe("speed factor: an instance's own prefill rate, shrunk to the pool's by the pool's spread", () => {
  it("identical workers whose windows differ by interference: every factor exactly 1", () => {
    // issue 20's no-shared-prefix trace (one-price.spec.ts noisySnap): 0.123-0.292 ms per token on
    // one engine; the slowest is 1.4 robust spreads above the median
    const out = new StaticArray<f64>(8);
    speedFactors(arr([0.275, 0.223, 0.140, 0.165, 0.158, 0.198, 0.123, 0.292]), out, SPEED_SIGMAS, SPEED_NOISE_FLOOR);
    for (let i = 0; i < 8; i++) expect(out[i]).toBe(1.0);
  });

  it("the old generation among the llama instances is priced slower; the fast ones and a lone model are not", () => {
    const f = new LlmFixture(mixedSnap());
    const med = (0.090 + 0.108) / 2; // the service's median (poolTerms), all eight
    for (let i = 0; i < 4; i++) { expect(f.lp.speed[i]).toBe(1.0); expect(f.lp.prefillMs[i]).toBeCloseTo(med, 4); }
    for (let i = 4; i < 6; i++) {
      // own / llama median = 0.161 / 0.0895 = 1.8, ln 0.59: shrunk by the noise floor, (1 − (0.3 / 0.59)²) of it
      expect(f.lp.speed[i]).toBeGreaterThan(1.45);
      expect(f.lp.speed[i]).toBeLessThanOrEqual(1.81);
      expect(f.lp.prefillMs[i]).toBeCloseTo(med * f.lp.speed[i], 4);
      expect(f.lp.decodeIdle[i]).toBeCloseTo(10.8, 3); // prefill only (applySpeed)
    }
    // mistral: two instances, never told apart (each is one spread from their median)
    for (let i = 6; i < 8; i++) expect(f.lp.speed[i]).toBe(1.0);
  });

  it("never cheaper: unknown, faster-looking, or fewer than 3 known rates keep 1", () => {
    const out = new StaticArray<f64>(6);
    speedFactors(arr([NaN, 0.03, 0.09, 0.091, 0.089, 0.09]), out, SPEED_SIGMAS, SPEED_NOISE_FLOOR);
    for (let i = 0; i < 6; i++) expect(out[i]).toBe(1.0);
    const two = new StaticArray<f64>(3);
    speedFactors(arr([0.09, NaN, 0.3]), two, SPEED_SIGMAS, SPEED_NOISE_FLOOR);
    for (let i = 0; i < 3; i++) expect(two[i]).toBe(1.0);
    // and a factor is never above the instance's own rate over the median
    const one = new StaticArray<f64>(5);
    speedFactors(arr([0.09, 0.091, 0.089, 0.09, 0.2]), one, SPEED_SIGMAS, SPEED_NOISE_FLOOR);
    expect(one[4]).toBeGreaterThan(1.9);
    expect(one[4]).toBeLessThanOrEqual(0.2 / 0.09 + 1e-9);
  });

  it("a long uncached prompt is not sent to the idle old-generation instance for its queue alone", () => {
    // seeds 1 and 4's critical tail (docs/benchmarks/llm-r9a.md): 2,100 uncached tokens, the fast
    // llama instances each running one request, the old ones none. On the build before, all six
    // were priced at the median rate (2,100 × 0.099 = 208 ms) and the old ones won by the decode
    // of the batch they would not share, where their prefill takes 1.8× as long.
    const f = new LlmFixture(mixedSnap());
    for (let i = 0; i < 4; i++) f.inflight[i] = 1;
    const rc = new RequestCost();
    rc.recent = f.recent;
    rc.modelCol = f.lp.modelColumn("llama");
    rc.cachedBlocks = new StaticArray<i32>(8);
    rc.promptTokens = 2100;
    rc.outTokens = 64;
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, rc, new CostParams());
    for (let i = 0; i < 4; i++) {
      expect(f.plan.cost[4]).toBeGreaterThan(f.plan.cost[i]);
      expect(f.plan.cost[5]).toBeGreaterThan(f.plan.cost[i]);
    }
  });
});
