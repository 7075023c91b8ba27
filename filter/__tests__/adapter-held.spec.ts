// Adapters this proxy has requests in flight for (lib/choice/adapter-held.ts): an adapter whose
// requests are queued here, streaming or not, stays pinned; one the scrape showed loaded with every
// slot held and another adapter waiting, with none of its requests in flight here, is priced as a
// drain (docs/benchmarks/llm-r8c.md seed 3, docs/benchmarks/llm-r9a.md).
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE, MODEL_LOADED, MODEL_WAITING } from "../assembly/lib/snapshot-llm";
import { Candidate, candidateFrom, Plan, MODEL_CONDITIONAL } from "../assembly/lib/choose";
import { LlmPlan, buildLlmPlan, modelHash } from "../assembly/lib/choice/plan-llm";
import { AdapterStreams } from "../assembly/lib/choice/adapter-streams";
import { heldCostMs, slotPromised, otherWaiting } from "../assembly/lib/choice/adapter-held";
import { RequestCost, CostParams } from "../assembly/lib/choice/score-request";
import { pickForRequest, RequestPick } from "../assembly/lib/choose-request";
import { CRIT_CRITICAL } from "../assembly/lib/criticality";
import { Rng } from "../assembly/lib/inflight";
import { PendingPrefill } from "../assembly/lib/pending-prefill";

const SQL = modelHash("sql-lora"), CHAT = modelHash("chat-lora"), CODE = modelHash("code-lora");
const MODELS = ["llama", "sql-lora", "chat-lora", "code-lora"];

function inst(addr: string): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.3; s.esMs = 100; s.es2Ms2 = 20000; s.slots = 8;
  return s;
}

function llm(addr: string, flags: Array<u8>, prefill: f32): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = MODELS; l.modelFlags = flags;
  l.prefillMsPerToken = prefill; l.decodeMsPerToken = 20; l.kvCacheUsage = 0.3; l.maxLoras = 2;
  return l;
}

/**
 * Two instances (in-flight slots 7 and 8) with the same prefill rate (the pool's): the scrape shows
 * on 0 code-lora and sql-lora loaded (no slot free) and chat-lora waiting, on 1 code-lora loaded
 * with a slot free. Instance 0 is the cheaper by its static wait (lower rho).
 */
class Fleet {
  plan: Plan;
  lp: LlmPlan = new LlmPlan();
  inflight: Array<i32> = new Array<i32>(10);
  pending: PendingPrefill = new PendingPrefill();
  rc: RequestCost = new RequestCost();
  cp: CostParams = new CostParams();
  out: RequestPick = new RequestPick();
  constructor(chatWaitsOn0: bool) {
    const snap = new Snapshot();
    const a = inst("10.0.0.1:80"), b = inst("10.0.0.2:80");
    b.rho = 0.6;
    snap.instances = [a, b];
    snap.llm = [
      llm("10.0.0.1:80", [MODEL_BASE, MODEL_LOADED, chatWaitsOn0 ? MODEL_WAITING : 0, MODEL_LOADED], 0.2),
      llm("10.0.0.2:80", [MODEL_BASE, 0, 0, MODEL_LOADED], 0.2),
    ];
    const cands = new Array<Candidate>();
    const es = new Array<f64>(), w = new Array<f64>();
    for (let i = 0; i < 2; i++) {
      const c = candidateFrom(snap.instances[i], MODEL_CONDITIONAL, 60000, 0, false);
      c.slot = 7 + i;
      cands.push(c);
      es.push(c.perItemMs * c.slots);
      w.push(c.weight);
    }
    this.plan = new Plan(cands);
    this.lp = buildLlmPlan(this.plan, "llm", snap.llm, es, w);
    this.rc.cachedBlocks = new StaticArray<i32>(2);
    this.rc.promptTokens = 1000;
    this.rc.outTokens = 100;
    this.cp.adapterLoadMs = 40;
  }

  pick(model: string): i32 {
    this.pending = new PendingPrefill();
    this.rc.modelCol = this.lp.modelColumn(model);
    pickForRequest(this.plan, this.lp, this.inflight, this.pending, 0, 1, 0, new Rng(1), this.rc, this.cp, CRIT_CRITICAL, this.out);
    return this.out.pick.index;
  }
}

describe("adapter-held: this proxy's adapter requests in flight", () => {
  it("the fleet: without the waiter, code-lora goes to instance 0 (loaded, cheaper)", () => {
    const f = new Fleet(false);
    expect(f.pick("code-lora")).toBe(0);
    expect(f.rc.drainOf[0]).toBe(<u8>0);
  });

  it("a loaded adapter with every slot held, another adapter waiting and none of its requests in flight here: priced as a drain, a critical request goes elsewhere", () => {
    const f = new Fleet(true);
    const col = f.lp.modelColumn("code-lora");
    expect(otherWaiting(f.lp, col, 0)).toBe(true);
    expect(slotPromised(f.lp, f.rc.held, f.rc.streams, col, 0, 7)).toBe(true);
    expect(f.pick("code-lora")).toBe(1);
    expect(f.rc.drainOf[0]).toBe(<u8>1);
    // the drain's price: the load plus about one service time
    const calm = new Fleet(false);
    calm.pick("code-lora");
    f.pick("code-lora");
    expect(f.plan.cost[0] - calm.plan.cost[0]).toBeCloseTo(40 + f.lp.esMs[0], 6);
  });

  it("one of its requests in flight here, queued and not streaming: the adapter stays pinned, no drain", () => {
    const f = new Fleet(true);
    const t = f.rc.held.start(7, CODE);
    expect(f.pick("code-lora")).toBe(0);
    expect(f.rc.drainOf[0]).toBe(<u8>0);
    f.rc.held.end(t, CODE);                                // it ended: the slot goes to the waiter
    expect(f.pick("code-lora")).toBe(1);
  });

  it("it streams from instance 0 through another worker VM: pinned too", () => {
    const f = new Fleet(true);
    f.rc.streams.addRemote(7, CODE);
    expect(f.pick("code-lora")).toBe(0);
  });

  it("the waiting adapter itself, and the base model, are not priced as a drain", () => {
    const f = new Fleet(true);
    const chat = f.lp.modelColumn("chat-lora"), base = f.lp.modelColumn("llama");
    expect(slotPromised(f.lp, f.rc.held, f.rc.streams, chat, 0, 7)).toBe(false);   // not loaded: filter-model.ts prices its wait
    const run = new StaticArray<u8>(2);
    expect(heldCostMs(f.lp, f.rc.held, f.rc.streams, base, 0, 7, 0, 40, run)).toBe(0);
    expect(heldCostMs(f.lp, f.rc.held, f.rc.streams, -1, 0, 7, 0, 40, run)).toBe(0);
  });

  it("a free slot, or an unknown adapter capacity, keeps a loaded adapter resident", () => {
    const f = new Fleet(true);
    const col = f.lp.modelColumn("code-lora");
    f.lp.loraRoom[0] = 1;
    expect(slotPromised(f.lp, f.rc.held, f.rc.streams, col, 0, 7)).toBe(false);
    f.lp.loraRoom[0] = -1;
    expect(slotPromised(f.lp, f.rc.held, f.rc.streams, col, 0, 7)).toBe(false);
  });

  it("max_loras other adapters with requests in flight here, none streaming: a request for a third waits for a drain", () => {
    const f = new Fleet(false);
    f.lp.loraRoom[0] = 1;                                  // the scrape: a slot free on 0
    expect(f.pick("chat-lora")).toBe(0);
    const a = f.rc.held.start(7, SQL);
    const b = f.rc.held.start(7, CODE);
    expect(f.pick("chat-lora")).toBe(1);
    expect(f.rc.drainOf[0]).toBe(<u8>1);
    f.rc.held.end(a, SQL);
    expect(f.pick("chat-lora")).toBe(0);
    f.rc.held.end(b, CODE);
  });

  it("a drain already priced by the stream table or the marks stays as it is", () => {
    const f = new Fleet(true);
    const col = f.lp.modelColumn("code-lora");
    const run = new StaticArray<u8>(2);
    expect(heldCostMs(f.lp, f.rc.held, f.rc.streams, col, 0, 7, 5000, 40, run)).toBe(5000);
    run[0] = 1;                                            // it streams there: it joins the batch
    expect(heldCostMs(f.lp, f.rc.held, f.rc.streams, col, 0, 7, 0, 40, run)).toBe(0);
  });
});
