// LoRA adapters sent ahead of the scrape (lib/choice/adapter-sends.ts): an adapter sent to an
// instance that had not loaded it takes a LoRA slot there until a scrape shows it; another adapter
// that would need that slot is priced with a wait for a drain (filter-model.ts), not left out.
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE, MODEL_LOADED, MODEL_WAITING } from "../assembly/lib/snapshot-llm";
import { Candidate, candidateFrom, Plan, MODEL_CONDITIONAL } from "../assembly/lib/choose";
import { LlmPlan, buildLlmPlan, modelHash } from "../assembly/lib/choice/plan-llm";
import { modelCostMs } from "../assembly/lib/choice/filter-model";
import { AdapterSends, ADAPTER_SENDS_CAPACITY } from "../assembly/lib/choice/adapter-sends";
import { AdapterShare } from "../assembly/lib/choice/adapter-share";
import { Inflight } from "../assembly/lib/inflight";

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

// Shared across worker VMs (lib/choice/adapter-share.ts): two VMs, each with its own AdapterSends
// and in-flight table (the same addresses, possibly in other slots), exchanging one document.
describe("AdapterShare", () => {
  it("a mark one VM publishes is applied by the other: being loaded there, one LoRA slot taken", () => {
    const p = plan();
    const lp0 = build(p), lp1 = build(p);
    // VM 1 knows the addresses in another slot order
    const inf0 = new Inflight(), inf1 = new Inflight();
    inf0.beginEpoch(); inf0.slotFor("10.0.0.1:80"); inf0.slotFor("10.0.0.2:80");
    inf1.beginEpoch(); inf1.slotFor("10.0.0.2:80"); inf1.slotFor("10.0.0.1:80");
    const slots0 = new StaticArray<i32>(2), slots1 = new StaticArray<i32>(2);
    slots0[0] = inf0.slotOf("10.0.0.1:80"); slots0[1] = inf0.slotOf("10.0.0.2:80");
    slots1[0] = inf1.slotOf("10.0.0.1:80"); slots1[1] = inf1.slotOf("10.0.0.2:80");
    const own0 = new AdapterSends(), own1 = new AdapterSends();
    const sh0 = new AdapterShare(), sh1 = new AdapterShare();
    const chat = lp0.modelColumn("chat-lora"), code = lp0.modelColumn("code-lora");
    // VM 0 sends chat-lora to instance 0 (one free slot there)
    expect(own0.sent(lp0, chat, 0, slots0[0], 1000)).toBe(true);
    let doc = sh0.merge(new ArrayBuffer(0), own0, 7, 1000, 5000, inf0);
    doc = sh1.merge(doc, own1, 9, 1010, 5000, inf1);
    expect(sh1.remoteCount).toBe(1);
    expect(modelCostMs(lp1, code, 0, 200)).toBe(200.0);        // before: the free slot
    expect(sh1.apply(lp1, slots1)).toBe(1);
    expect(lp1.flagsOf(chat, 0) & MODEL_WAITING).toBe(MODEL_WAITING);
    expect(modelCostMs(lp1, chat, 0, 200)).toBe(200.0);        // chat-lora joins the load
    expect(modelCostMs(lp1, code, 0, 200)).toBe(300.0);        // code-lora waits for a drain (+ E[S] 100)
    expect(lp1.loraSent[0]).toBe(1);
    // applied again (the next tick), the mark counts once
    lp1.resetMarks();
    expect(lp1.loraSent[0]).toBe(0);
    expect(lp1.flagsOf(chat, 0) & MODEL_WAITING).toBe(<u8>0);  // back to the snapshot's flags
    sh1.apply(lp1, slots1);
    sh1.apply(lp1, slots1);
    expect(lp1.loraSent[0]).toBe(1);
    // VM 1 sending chat-lora there itself marks nothing more
    expect(own1.sent(lp1, chat, 0, slots1[0], 1020)).toBe(false);
    // both sections are in the document VM 1 writes; VM 0 reads none of its own back
    doc = sh0.merge(doc, own0, 7, 1030, 5000, inf0);
    expect(sh0.remoteCount).toBe(0);
  });

  it("sections older than maxAgeMs are dropped; a truncated document is read up to the break; unknown addresses are skipped", () => {
    const p = plan();
    const lp = build(p);
    const inf = new Inflight();
    inf.beginEpoch(); inf.slotFor("10.0.0.1:80"); inf.slotFor("10.0.0.2:80");
    const own = new AdapterSends(), sh = new AdapterShare(), other = new AdapterSends(), sho = new AdapterShare();
    const chat = lp.modelColumn("chat-lora");
    other.sent(lp, chat, 0, inf.slotOf("10.0.0.1:80"), 1000);
    const doc = sho.merge(new ArrayBuffer(0), other, 3, 1000, 5000, inf);
    // expired
    sh.merge(doc, own, 4, 7000, 5000, inf);
    expect(sh.remoteCount).toBe(0);
    // truncated in the record: nothing read, no trap
    sh.merge(doc.slice(0, doc.byteLength - 2), own, 4, 1000, 5000, inf);
    expect(sh.remoteCount).toBe(0);
    // an address this VM has no slot for
    const stranger = new Inflight();
    stranger.beginEpoch(); stranger.slotFor("10.9.9.9:80");
    const before = sh.skipped;
    sh.merge(doc, own, 4, 1000, 5000, stranger);
    expect(sh.remoteCount).toBe(0);
    expect(sh.skipped).toBe(before + 1);
  });

  it("modelHash: FNV-1a, distinct for the fleet's adapter names", () => {
    expect(modelHash("")).toBe(<u32>0x811c9dc5);
    expect(modelHash("sql-lora")).not.toBe(modelHash("chat-lora"));
    expect(modelHash("chat-lora")).toBe(modelHash("chat-lora"));
  });
});
