// Adapters this proxy sees streaming from each instance (lib/choice/adapter-streams.ts): where the
// request's adapter streams it joins the running batch; where max_loras other adapters stream it
// waits for a drain whatever the scrape says.
import { RecentSends } from "../assembly/lib/recent-sends";
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE, MODEL_LOADED } from "../assembly/lib/snapshot-llm";
import { Candidate, candidateFrom, Plan, MODEL_CONDITIONAL } from "../assembly/lib/choose";
import { LlmPlan, buildLlmPlan, modelHash } from "../assembly/lib/choice/plan-llm";
import {
  AdapterStreams, PER_SLOT, NO_TICKET, STREAMS_UNKNOWN, STREAMS_RUNNING, STREAMS_FULL,
} from "../assembly/lib/choice/adapter-streams";
import { RequestCost, CostParams, scoreRequest } from "../assembly/lib/choice/score-request";
import { pickForRequest, RequestPick } from "../assembly/lib/choose-request";
import { CRIT_CRITICAL, CRIT_STANDARD } from "../assembly/lib/criticality";
import { Rng, Inflight } from "../assembly/lib/inflight";
import { AdapterStreamsShare } from "../assembly/lib/choice/adapter-streams-share";
import { PendingPrefill } from "../assembly/lib/pending-prefill";

const SQL = modelHash("sql-lora"), CHAT = modelHash("chat-lora"), CODE = modelHash("code-lora");

describe("AdapterStreams", () => {
  it("an adapter streams from a slot between start and end, counted per request", () => {
    const s = new AdapterStreams();
    expect(s.state(3, SQL, 2)).toBe(STREAMS_UNKNOWN);
    const t1 = s.start(3, SQL);
    const t2 = s.start(3, SQL);
    expect(t1).not.toBe(NO_TICKET);
    expect(s.streaming(3, SQL)).toBe(2);
    expect(s.state(3, SQL, 2)).toBe(STREAMS_RUNNING);
    expect(s.state(2, SQL, 2)).toBe(STREAMS_UNKNOWN);   // another slot
    s.end(t1, SQL);
    expect(s.state(3, SQL, 2)).toBe(STREAMS_RUNNING);
    s.end(t2, SQL);
    expect(s.streaming(3, SQL)).toBe(0);
    expect(s.state(3, SQL, 2)).toBe(STREAMS_UNKNOWN);
  });

  it("max_loras other adapters streaming: a request for a third waits; fewer, or max_loras unknown: nothing known", () => {
    const s = new AdapterStreams();
    const a = s.start(0, CHAT);
    expect(s.state(0, SQL, 2)).toBe(STREAMS_UNKNOWN);   // one slot of two taken
    const b = s.start(0, CODE);
    expect(s.state(0, SQL, 2)).toBe(STREAMS_FULL);
    expect(s.state(0, SQL, 3)).toBe(STREAMS_UNKNOWN);
    expect(s.state(0, SQL, -1)).toBe(STREAMS_UNKNOWN);
    expect(s.state(0, CHAT, 2)).toBe(STREAMS_RUNNING);
    s.end(a, CHAT);                                      // a drain frees a slot
    expect(s.state(0, SQL, 2)).toBe(STREAMS_UNKNOWN);
    expect(s.state(0, CODE, 2)).toBe(STREAMS_RUNNING);  // the entries stay packed after a removal
    s.end(b, CODE);
    expect(s.state(0, CODE, 2)).toBe(STREAMS_UNKNOWN);
  });

  it("a forgotten slot (another address) drops its streams; their tickets end without effect", () => {
    const s = new AdapterStreams();
    const old = s.start(1, SQL);
    s.forgetSlot(1);
    expect(s.state(1, SQL, 2)).toBe(STREAMS_UNKNOWN);
    const now = s.start(1, SQL);
    s.end(old, SQL);                                     // the old address's stream ends
    expect(s.streaming(1, SQL)).toBe(1);                 // the new one still counts
    s.end(now, SQL);
    expect(s.streaming(1, SQL)).toBe(0);
    s.end(NO_TICKET, SQL);
    s.forgetSlot(99);                                    // never seen: nothing to do
    expect(s.slots()).toBe(2);
  });

  it("bounded: at most PER_SLOT adapters per slot, the rest dropped and counted; slots grow with the highest slot seen", () => {
    const s = new AdapterStreams();
    for (let k = 0; k < PER_SLOT; k++) expect(s.start(5, <u32>k)).not.toBe(NO_TICKET);
    expect(s.start(5, <u32>PER_SLOT)).toBe(NO_TICKET);
    expect(s.dropped).toBe(1);
    expect(s.start(5, 0)).not.toBe(NO_TICKET);          // one already there still counts
    expect(s.slots()).toBe(6);
    expect(s.start(-1, SQL)).toBe(NO_TICKET);
    expect(s.dropped).toBe(1);
  });
});

function inst(addr: string): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.3; s.esMs = 100; s.es2Ms2 = 20000; s.slots = 8;
  return s;
}

function llm(addr: string, models: Array<string>, flags: Array<u8>, prefill: f32): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = models; l.modelFlags = flags;
  l.prefillMsPerToken = prefill; l.decodeMsPerToken = 20; l.kvCacheUsage = 0.3; l.maxLoras = 2;
  return l;
}

class Fleet {
  plan: Plan;
  lp: LlmPlan = new LlmPlan();
  /** in flight per in-flight slot (the candidates' slots are 7, 8, 9) */
  inflight: Array<i32> = new Array<i32>(10);
  pending: PendingPrefill = new PendingPrefill();
  rc: RequestCost = new RequestCost();
  cp: CostParams = new CostParams();
  out: RequestPick = new RequestPick();
  /** full0: the scrape shows chat-lora loaded on instance 0 as well (both its LoRA slots held). */
  constructor(full0: bool = false) {
    const snap = new Snapshot();
    snap.instances = [inst("10.0.0.1:80"), inst("10.0.0.2:80"), inst("10.0.0.3:80")];
    // the scrape: sql-lora loaded on 0 (cheapest prefill) and 1; on 2 only the base model
    snap.llm = [
      llm("10.0.0.1:80", ["llama", "sql-lora", "chat-lora", "code-lora"], [MODEL_BASE, MODEL_LOADED, full0 ? MODEL_LOADED : 0, 0], 0.01),
      llm("10.0.0.2:80", ["llama", "sql-lora", "chat-lora", "code-lora"], [MODEL_BASE, MODEL_LOADED, 0, 0], 0.5),
      llm("10.0.0.3:80", ["llama", "sql-lora", "chat-lora", "code-lora"], [MODEL_BASE, 0, 0, 0], 1),
    ];
    const cands = new Array<Candidate>();
    const es = new Array<f64>(), w = new Array<f64>();
    for (let i = 0; i < 3; i++) {
      const c = candidateFrom(snap.instances[i], MODEL_CONDITIONAL, 60000, 0, false);
      c.slot = 7 + i;   // in-flight slots 7, 8, 9
      cands.push(c);
      es.push(c.perItemMs * c.slots);
      w.push(c.weight);
    }
    this.plan = new Plan(cands);
    this.lp = buildLlmPlan(this.plan, "llm", snap.llm, es, w);
    this.rc.cachedBlocks = new StaticArray<i32>(3);
    this.rc.promptTokens = 1000;
    this.rc.outTokens = 100;
    this.cp.adapterLoadMs = 40;
  }

  /** One decision on its own: nothing pending from the picks before (a pick charges its prefill),
   *  nor sent lately (a pick is one of the sends the next one expects behind it: recent-sends.ts). */
  pick(model: string, crit: i32): i32 {
    this.pending = new PendingPrefill();
    this.rc.recent = new RecentSends();
    this.rc.modelCol = this.lp.modelColumn(model);
    pickForRequest(this.plan, this.lp, this.inflight, this.pending, 0, 1, 0, new Rng(1), this.rc, this.cp, crit, this.out);
    return this.out.pick.index;
  }
}
describe("score-request and the pickers with adapter streams", () => {
  it("no streams: the scrape decides (sql-lora loaded on the cheapest instance)", () => {
    const f = new Fleet();
    expect(f.pick("sql-lora", CRIT_CRITICAL)).toBe(0);
    expect(f.rc.runOf[0]).toBe(<u8>0);
    expect(f.rc.drainOf[0]).toBe(<u8>0);
  });

  it("two other adapters stream where the scrape showed sql-lora loaded: a drain there, priced and avoided", () => {
    const f = new Fleet();
    f.rc.streams.start(7, CHAT);
    f.rc.streams.start(7, CODE);
    f.pick("sql-lora", CRIT_STANDARD);
    expect(f.rc.drainOf[0]).toBe(<u8>1);
    // priced as the load plus a drain of about one service time (E[S] 100 ms × 8 slots here)
    const loaded = new Fleet();
    loaded.pick("sql-lora", CRIT_STANDARD);
    expect(f.plan.cost[0] - loaded.plan.cost[0]).toBeCloseTo(40 + f.lp.esMs[0], 6);
    expect(f.pick("sql-lora", CRIT_CRITICAL)).toBe(1);
    // chat-lora itself streams there: no slot needed, no load
    expect(f.pick("chat-lora", CRIT_CRITICAL)).toBe(0);
    expect(f.rc.runOf[0]).toBe(<u8>1);
    expect(f.rc.drainOf[0]).toBe(<u8>0);
  });

  it("the scrape showed sql-lora loaded with both slots held, and another adapter streams there now: the critical price adds a load (it may have drained), not a drain", () => {
    const f = new Fleet(true);
    expect(f.lp.loraRoom[0]).toBe(0);
    f.pick("sql-lora", CRIT_STANDARD);
    const scraped = f.plan.cost[0];                      // nothing streams: the scrape decides
    const speed = f.rc.speedOf[0];
    f.rc.streams.start(7, CHAT);
    f.pick("sql-lora", CRIT_STANDARD);
    expect(f.plan.cost[0]).toBeCloseTo(scraped, 6);     // the standard price keeps the scrape's
    expect(f.rc.speedOf[0] - speed).toBeCloseTo(40 * f.lp.inv[0], 6);  // adapterLoadMs, de-weighted
    expect(f.rc.drainOf[0]).toBe(<u8>0);
    expect(f.rc.runOf[0]).toBe(<u8>0);
    // sql-lora streams there as well: known running, no load
    f.rc.streams.start(7, SQL);
    f.pick("sql-lora", CRIT_STANDARD);
    expect(f.rc.speedOf[0]).toBeCloseTo(speed, 6);
    // a free slot at the scrape: a drained adapter loads again without a wait; the scrape decides
    const g = new Fleet();
    g.pick("sql-lora", CRIT_STANDARD);
    const free = g.rc.speedOf[0];
    g.rc.streams.start(7, CHAT);
    g.pick("sql-lora", CRIT_STANDARD);
    expect(g.rc.speedOf[0]).toBeCloseTo(free, 6);
    // the base model is no adapter
    f.pick("llama", CRIT_STANDARD);
    expect(f.rc.speedOf[0]).toBeCloseTo(speed, 6);
  });

  it("a critical request for an adapter goes where it streams rather than where a full instance's scrape showed it, at an equal price; a standard one keeps the scrape's price", () => {
    const f = new Fleet(true);
    f.rc.streams.start(7, CHAT);                         // instance 0: chat-lora streams, sql-lora not seen
    f.rc.streams.start(8, SQL);                          // instance 1: sql-lora streams
    // one pool, one engine model: 0 and 1 are priced alike but for that (a 12 s wait on such an
    // instance in the 2x overload run, docs/benchmarks/llm-r15a.md)
    expect(f.pick("sql-lora", CRIT_CRITICAL)).toBe(1);
    expect(f.pick("sql-lora", CRIT_STANDARD)).toBe(0);
  });

  it("where the adapter streams it is priced without a load, also where the scrape did not show it loaded", () => {
    const f = new Fleet();
    f.pick("sql-lora", CRIT_STANDARD);
    const before = f.plan.cost[2];                       // instance 2: the scrape has only the base model there
    expect(f.rc.runOf[2]).toBe(<u8>0);
    f.rc.streams.start(9, SQL);
    f.pick("sql-lora", CRIT_STANDARD);
    expect(f.rc.runOf[2]).toBe(<u8>1);
    expect(before - f.plan.cost[2]).toBeCloseTo(40, 6);  // the adapter load (adapterLoadMs) off its price
    // the base model is not an adapter: streams of adapters do not touch it
    f.pick("llama", CRIT_CRITICAL);
    expect(f.rc.runOf[2]).toBe(<u8>0);
  });

  it("a critical request picks by cost where its adapter streams too: a stream does not pull it to a busier instance", () => {
    const f = new Fleet();
    f.rc.streams.start(9, SQL);                          // instance 2: slowest prefill
    expect(f.pick("sql-lora", CRIT_CRITICAL)).toBe(0);   // the scrape shows sql-lora loaded on the cheapest
    expect(f.rc.runOf[2]).toBe(<u8>1);
  });

  it("the scoring pass over a fleet whose instances stream nothing leaves runOf at 0", () => {
    const f = new Fleet();
    f.rc.modelCol = f.lp.modelColumn("code-lora");
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 0, f.rc, f.cp);
    for (let i = 0; i < 3; i++) expect(f.rc.runOf[i]).toBe(<u8>0);
  });
});

describe("AdapterStreamsShare: the streams of the other worker VMs", () => {
  it("each VM streams one adapter from an instance with two LoRA slots: after an exchange both see it full", () => {
    const X = "10.0.0.1:80", Y = "10.0.0.2:80";
    // the VMs gave the addresses different in-flight slots
    const inf0 = new Inflight(), inf1 = new Inflight();
    inf0.beginEpoch(); inf0.slotFor(X); inf0.slotFor(Y);
    inf1.beginEpoch(); inf1.slotFor(Y); inf1.slotFor(X);
    const x0 = inf0.slotOf(X), x1 = inf1.slotOf(X);
    expect(x0).not.toBe(x1);
    const s0 = new AdapterStreams(), s1 = new AdapterStreams();
    const sh0 = new AdapterStreamsShare(), sh1 = new AdapterStreamsShare();
    const t0 = s0.start(x0, CHAT);
    const c1 = s1.start(x1, CODE);
    expect(s0.state(x0, SQL, 2)).toBe(STREAMS_UNKNOWN);  // each sees one of the two
    expect(s1.state(x1, SQL, 2)).toBe(STREAMS_UNKNOWN);
    let doc = sh0.merge(new ArrayBuffer(0), s0, 1, 1000, 5000, inf0);
    doc = sh1.merge(doc, s1, 2, 1010, 5000, inf1);
    doc = sh0.merge(doc, s0, 1, 1020, 5000, inf0);
    expect(s0.state(x0, SQL, 2)).toBe(STREAMS_FULL);
    expect(s1.state(x1, SQL, 2)).toBe(STREAMS_FULL);
    expect(s1.state(x1, CHAT, 2)).toBe(STREAMS_RUNNING); // the other VM's stream: it joins the batch
    expect(s0.state(inf0.slotOf(Y), SQL, 2)).toBe(STREAMS_UNKNOWN);
    // the same adapter streaming in both VMs counts once
    s1.start(x1, CHAT);
    doc = sh1.merge(doc, s1, 2, 1030, 5000, inf1);
    expect(s1.state(x1, SQL, 3)).toBe(STREAMS_UNKNOWN);
    // VM 0's chat-lora ends: VM 1 still streams both, so both VMs still see the slots full
    s0.end(t0, CHAT);
    doc = sh0.merge(doc, s0, 1, 1040, 5000, inf0);
    expect(s0.state(x0, SQL, 2)).toBe(STREAMS_FULL);
    doc = sh1.merge(doc, s1, 2, 1050, 5000, inf1);
    expect(s1.state(x1, SQL, 2)).toBe(STREAMS_FULL);
    // VM 1's code-lora ends: its next section has chat-lora alone, and VM 0 sees a slot free
    s1.end(c1, CODE);
    doc = sh1.merge(doc, s1, 2, 1060, 5000, inf1);
    doc = sh0.merge(doc, s0, 1, 1070, 5000, inf0);
    expect(s0.state(x0, SQL, 2)).toBe(STREAMS_UNKNOWN);
    expect(s0.state(x0, CHAT, 2)).toBe(STREAMS_RUNNING);
  });

  it("a VM that stops publishing ages out; unknown addresses are skipped and counted; a truncated document is read up to the break", () => {
    const X = "10.0.0.1:80";
    const inf = new Inflight();
    inf.beginEpoch(); inf.slotFor(X);
    const x = inf.slotOf(X);
    const mine = new AdapterStreams(), other = new AdapterStreams();
    const sh = new AdapterStreamsShare(), sho = new AdapterStreamsShare();
    other.start(x, CHAT);
    other.start(x, CODE);
    const doc = sho.merge(new ArrayBuffer(0), other, 9, 1000, 5000, inf);
    sh.merge(doc, mine, 4, 1000, 5000, inf);
    expect(mine.state(x, SQL, 2)).toBe(STREAMS_FULL);
    sh.merge(doc, mine, 4, 7000, 5000, inf);             // 6 s later, nothing newer: gone
    expect(mine.state(x, SQL, 2)).toBe(STREAMS_UNKNOWN);
    sh.merge(doc.slice(0, doc.byteLength - 2), mine, 4, 1000, 5000, inf);
    expect(mine.state(x, CHAT, 2)).toBe(STREAMS_RUNNING); // the first record, whole
    expect(mine.state(x, SQL, 2)).toBe(STREAMS_UNKNOWN);  // the second, cut: not read
    const stranger = new Inflight();
    stranger.beginEpoch(); stranger.slotFor("10.9.9.9:80");
    const before = sh.skipped;
    sh.merge(doc, mine, 4, 1000, 5000, stranger);
    expect(sh.skipped).toBe(before + 2);
  });

  it("a forgotten slot drops the other VMs' streams too", () => {
    const s = new AdapterStreams();
    s.addRemote(2, CHAT);
    s.addRemote(2, CODE);
    expect(s.state(2, SQL, 2)).toBe(STREAMS_FULL);
    s.forgetSlot(2);
    expect(s.state(2, SQL, 2)).toBe(STREAMS_UNKNOWN);
    for (let k = 0; k < PER_SLOT; k++) expect(s.addRemote(3, <u32>k)).toBe(true);
    expect(s.addRemote(3, <u32>PER_SLOT)).toBe(false);
    expect(s.addRemote(3, 0)).toBe(true);                // already there
  });
});
