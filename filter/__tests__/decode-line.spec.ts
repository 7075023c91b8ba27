// Decode priced as the engine behaves (issue 20 cause 3): where the agent publishes an instance's
// decode line (section type 5: ms per output token = idle + perSeq · batch), the request's decode
// is priced on the batch it joins, not in proportion to the batch's fill.
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE, DecodeLine, mergeDecodeLines, decodeLineOrNaN } from "../assembly/lib/snapshot-llm";
import { Candidate, candidateFrom, Plan, MODEL_CONDITIONAL, PICKER_BAND } from "../assembly/lib/choose";
import { LlmPlan, buildLlmPlan } from "../assembly/lib/choice/plan-llm";
import { RequestCost, CostParams } from "../assembly/lib/choice/score-request";
import { pickForRequest, RequestPick } from "../assembly/lib/choose-request";
import { CRIT_STANDARD } from "../assembly/lib/criticality";
import { Rng } from "../assembly/lib/inflight";
import { LlmFixture, snapOf } from "./llm-fixture";

function inst(addr: string, q: f32): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.5; s.esMs = 3000; s.es2Ms2 = 2 * 3000 * 3000; s.queueDepth = q; s.slots = 8;
  return s;
}

/** Llama-3.1-8B on A100: 0.1 ms prefill per token, 17 ms per output token measured at its usual batch; `line`: idle 10.8 + 0.2 / sequence */
function llm(addr: string, line: bool): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = ["m"]; l.modelFlags = [MODEL_BASE];
  l.prefillMsPerToken = 0.1; l.decodeMsPerToken = 17; l.kvCacheUsage = 0.3;
  if (line) { l.decodeIdleMs = 10.8; l.decodeMsPerSeq = 0.2; }
  return l;
}

/** instance 0: backlog 5, instance 1: backlog 2; lines on (a, b) */
class Two extends LlmFixture {
  constructor(a: bool, b: bool) {
    super(snapOf([inst("10.0.0.1:80", 5), inst("10.0.0.2:80", 2)], [llm("10.0.0.1:80", a), llm("10.0.0.2:80", b)]));
  }
  /** a generated-shared-prefix request (2,271 tokens, 256 out) whose 2,048-token prefix instance 0 holds; band 0 */
  pick(): i32 {
    const rc = new RequestCost();
    rc.modelCol = this.lp.modelColumn("m");
    rc.cachedBlocks = new StaticArray<i32>(2);
    rc.cachedBlocks[0] = 128;
    rc.promptTokens = 2271;
    rc.outTokens = 256;
    const cp = new CostParams();
    cp.shed.set(100, 100, 100, 100, Infinity, Infinity, 0.2);
    const out = new RequestPick();
    pickForRequest(this.plan, this.lp, this.inflight, this.pending, 1000, PICKER_BAND, 0, new Rng(1), rc, cp, CRIT_STANDARD, out);
    return out.pick.index;
  }
}

describe("decode line: decode priced on the batch the request joins", () => {

  it("the prefix holder with 3 more sequences wins: 3 × 0.2 ms × 256 tokens (154 ms) is less than the 205 ms prefill it saves", () => {
    const t = new Two(true, true);
    expect(t.pick()).toBe(0);
    // the decode difference as priced: 256 × 0.2 × (6 − 3)
    const d = (t.plan.cost[0] - t.plan.cost[1]);
    expect(d).toBeCloseTo(256.0 * 0.2 * 3 - 0.1 * 2048, 1);
  });

  it("without lines the occupancy rule prices the same 3 sequences at 256 × 17 × 3/9 ms and sends the request away from its prefix", () => {
    expect(new Two(false, false).pick()).toBe(1);
  });

  it("one unit: an instance without its own line takes the fleet's, scaled by its own time per token", () => {
    const t = new Two(true, false);
    expect(t.lp.decodeIdle[1]).toBeCloseTo(10.8);
    expect(t.lp.decodePerSeq[1]).toBeCloseTo(0.2);
    expect(t.pick()).toBe(0);
  });

  it("the section's terms: out of [0, 60000] ms reads as unknown; a line is merged only with both terms known", () => {
    expect(isNaN(decodeLineOrNaN(-1))).toBe(true);
    expect(isNaN(decodeLineOrNaN(<f32>NaN))).toBe(true);
    expect(isNaN(decodeLineOrNaN(70000))).toBe(true);
    expect(decodeLineOrNaN(0)).toBe(0);
    const recs = [llm("10.0.0.1:80", false), llm("10.0.0.2:80", false)];
    const a = new DecodeLine(); a.service = "llm"; a.addr = "10.0.0.2:80"; a.idleMs = 9; a.perSeqMs = 0.3;
    const b = new DecodeLine(); b.service = "llm"; b.addr = "10.0.0.1:80"; b.idleMs = 9; b.perSeqMs = NaN;
    mergeDecodeLines(recs, [a, b]);
    expect(recs[1].decodeIdleMs).toBe(9);
    expect(recs[1].decodeMsPerSeq).toBeCloseTo(0.3);
    expect(isNaN(recs[0].decodeIdleMs)).toBe(true);
  });
});
