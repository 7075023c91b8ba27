// LoRA adapters sent ahead of the scrape (lib/choice/adapter-sends.ts): an adapter sent to an
// instance that had not loaded it takes a LoRA slot there until a scrape shows it; another adapter
// that would need that slot is priced with a wait for a drain (filter-model.ts), not left out.
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE, MODEL_LOADED, MODEL_WAITING } from "../assembly/lib/snapshot-llm";
import { Candidate, candidateFrom, Plan, MODEL_CONDITIONAL } from "../assembly/lib/choose";
import { LlmPlan, buildLlmPlan } from "../assembly/lib/choice/plan-llm";
import { modelCostMs } from "../assembly/lib/choice/filter-model";
import { AdapterSends, ADAPTER_SENDS_CAPACITY } from "../assembly/lib/choice/adapter-sends";

function inst(addr: string): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.3; s.esMs = 100; s.es2Ms2 = 20000; s.slots = 4;
  return s;
}

function llm(addr: string, models: Array<string>, flags: Array<u8>): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = models; l.modelFlags = flags; l.maxLoras = 2;
  l.prefillMsPerToken = 0.1; l.decodeMsPerToken = 10; l.kvCacheUsage = 0.2;
  return l;
}

// instance 0: base + sql-lora loaded (one LoRA slot free); instance 1: sql-lora and chat-lora loaded (none free)
function build(plan: Plan): LlmPlan {
  const ls = [
    llm("10.0.0.1:80", ["llama", "sql-lora", "chat-lora", "code-lora"], [MODEL_BASE, MODEL_LOADED, 0, 0]),
    llm("10.0.0.2:80", ["llama", "sql-lora", "chat-lora", "code-lora"], [MODEL_BASE, MODEL_LOADED, MODEL_LOADED, 0]),
  ];
  const es = [100.0, 100.0], w = [1.0, 1.0];
  return buildLlmPlan(plan, "llm", ls, es, w);
}

function plan(): Plan {
  const snap = new Snapshot();
  snap.instances = [inst("10.0.0.1:80"), inst("10.0.0.2:80")];
  const cands = new Array<Candidate>();
  for (let i = 0; i < 2; i++) {
    const c = candidateFrom(snap.instances[i], MODEL_CONDITIONAL, 60000, 0, false);
    c.slot = 10 + i;
    cands.push(c);
  }
  return new Plan(cands);
}

describe("AdapterSends", () => {
  it("an adapter sent where it must be loaded is marked as being loaded; another adapter then waits for a slot to drain", () => {
    const p = plan();
    const lp = build(p);
    const chat = lp.modelColumn("chat-lora"), code = lp.modelColumn("code-lora");
    expect(modelCostMs(lp, chat, 0, 200)).toBe(200);
    expect(modelCostMs(lp, code, 0, 200)).toBe(200);   // before: room for either
    const s = new AdapterSends();
    expect(s.sent(lp, chat, 0, 10, 1000)).toBe(true);
    expect(lp.flagsOf(chat, 0) & MODEL_WAITING).toBe(MODEL_WAITING);
    expect(lp.loraRoom[0]).toBe(1);                    // the scrape's room, kept
    expect(lp.loraSent[0]).toBe(1);
    expect(modelCostMs(lp, chat, 0, 200)).toBe(200);   // the next chat-lora request joins the load
    expect(modelCostMs(lp, code, 0, 200)).toBe(300);   // code-lora waits for a drain: + E[S] (100 ms), still a candidate
    // an instance the scrape shows full stays out whatever was sent
    expect(modelCostMs(lp, code, 1, 200)).toBe(Infinity);
    // a base model or an adapter already there marks nothing
    expect(s.sent(lp, lp.modelColumn("llama"), 0, 10, 1000)).toBe(false);
    expect(s.sent(lp, lp.modelColumn("sql-lora"), 0, 10, 1000)).toBe(false);
    expect(s.sent(lp, chat, 0, 10, 1000)).toBe(false);
    expect(s.sent(lp, -1, 0, 10, 1000)).toBe(false);
    expect(s.count).toBe(1);
  });

  it("re-applied to plans rebuilt from a scrape older than the send; forgotten after a newer scrape or maxAgeMs", () => {
    const p = plan();
    const s = new AdapterSends(5000);
    let lp = build(p);
    s.sent(lp, lp.modelColumn("chat-lora"), 0, 10, 1000);
    // the agent republishes the scrape taken at 900: still without the send
    lp = build(p);
    s.reapply(lp, p.slot, [900.0, 900.0], 1250);
    expect(lp.loraSent[0]).toBe(1);
    expect(modelCostMs(lp, lp.modelColumn("code-lora"), 0, 200)).toBe(300);
    expect(s.count).toBe(1);
    // a scrape at 1900 shows the instance itself
    lp = build(p);
    s.reapply(lp, p.slot, [1900.0, 1900.0], 2000);
    expect(lp.loraSent[0]).toBe(0);
    expect(modelCostMs(lp, lp.modelColumn("code-lora"), 0, 200)).toBe(200);
    expect(s.count).toBe(0);
    // older than maxAgeMs: forgotten whatever the scrape
    lp = build(p);
    s.sent(lp, lp.modelColumn("chat-lora"), 0, 10, 3000);
    lp = build(p);
    s.reapply(lp, p.slot, [900.0, 900.0], 9000);
    expect(lp.loraSent[0]).toBe(0);
    expect(s.count).toBe(0);
    // a slot no longer in the plan: forgotten
    lp = build(p);
    s.sent(lp, lp.modelColumn("chat-lora"), 0, 99, 3000);
    lp = build(p);
    s.reapply(lp, p.slot, [900.0, 900.0], 3100);
    expect(s.count).toBe(0);
  });

  it("bounded: the oldest sends are forgotten first", () => {
    const p = plan();
    const s = new AdapterSends();
    for (let k = 0; k < ADAPTER_SENDS_CAPACITY + 10; k++) {
      const lp = build(p);
      s.sent(lp, lp.modelColumn("chat-lora"), 0, 10, <f64>k);
    }
    expect(s.count).toBe(ADAPTER_SENDS_CAPACITY);
  });
});
