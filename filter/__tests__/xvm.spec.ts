import { Inflight, Rng } from "../assembly/lib/inflight";
import { XvmMap, GaugeIds, xvmGaugeName, peekPair, peerCount, gaugesHold, XVM_MAX_PEERS, XVM_ACTIVE_MS } from "../assembly/lib/xvm";
import { InbandTable } from "../assembly/lib/inband";
import { Candidate, Plan, pick, candidateFrom, PICKER_P2C, MODEL_CONDITIONAL } from "../assembly/lib/choose";
import { InstanceState } from "../assembly/lib/snapshot";
import { parseConfig } from "../assembly/lib/config";

/** A fake resolver: id = token * 1000 + slot (the glue defines a gauge per name). */
class FakeIds extends GaugeIds {
  calls: i32 = 0;
  id(token: u32, slot: i32): u32 { this.calls++; return token * 1000 + <u32>slot; }
}

function cand(addr: string, slot: i32, staleMs: u32 = 5000): Candidate {
  const s = new InstanceState();
  s.service = "svc"; s.addr = addr; s.healthy = true;
  s.rho = 0.5; s.esMs = 80; s.es2Ms2 = 6400; s.queueDepth = 0; s.slots = 1;
  s.p99Ms = 100; s.baselineP99Ms = 100; s.dataAgeMs = 0;
  const c = candidateFrom(s, MODEL_CONDITIONAL, <f64>staleMs, 0, false);
  c.slot = slot;
  return c;
}

describe("cross-VM gauges (lib/xvm.ts)", () => {
  it("names a gauge by the VM's token and its own slot: bounded by the VM's slots, not the addresses seen", () => {
    expect(xvmGaugeName(3, 17)).toBe("switchyard.xvm.inflight.3.17");
  });

  it("maps each address to the other VMs' gauges by address, whatever slot each VM gave it", () => {
    const a = new Inflight(), b = new Inflight();
    // the VMs allocated their slots in different orders (different snapshots, churn)
    a.slotFor("x:1"); a.slotFor("y:1");
    b.slotFor("y:1"); b.slotFor("x:1"); b.slotFor("z:1");
    const ma = new XvmMap(), mb = new XvmMap();
    ma.lastSendMs = 1000; mb.lastSendMs = 1000;
    const ids = new FakeIds();
    let doc = ma.merge(new ArrayBuffer(0), 7, 1000, 500, a, ids);
    doc = mb.merge(doc, 9, 1010, 500, b, ids);
    // b reads a's gauges: x is a's slot 0, y a's slot 1
    expect(mb.n[b.slotOf("x:1")]).toBe(1);
    expect(mb.ids[b.slotOf("x:1") * XVM_MAX_PEERS]).toBe(7000);
    expect(mb.ids[b.slotOf("y:1") * XVM_MAX_PEERS]).toBe(7001);
    expect(mb.n[b.slotOf("z:1")]).toBe(0); // a does not plan z
    expect(mb.vms).toBe(2);
    // a reads b's: x is b's slot 1, y b's slot 0; its own section is replaced, not read
    doc = ma.merge(doc, 7, 1020, 500, a, ids);
    expect(ma.n[a.slotOf("x:1")]).toBe(1);
    expect(ma.ids[a.slotOf("x:1") * XVM_MAX_PEERS]).toBe(9001);
    expect(ma.ids[a.slotOf("y:1") * XVM_MAX_PEERS]).toBe(9000);
    expect(ma.vms).toBe(2);
  });

  it("a VM that stopped ticking is no longer read (its section expires), nor one that sends nothing", () => {
    const a = new Inflight(), b = new Inflight(), idle = new Inflight();
    a.slotFor("x:1"); b.slotFor("x:1"); idle.slotFor("x:1");
    const ma = new XvmMap(), mb = new XvmMap(), mi = new XvmMap();
    const ids = new FakeIds();
    ma.lastSendMs = 1000;
    // the idle VM (the main-thread VM, an idle worker) lists nothing: nobody reads its gauges
    let doc = mi.merge(new ArrayBuffer(0), 5, 1000, 500, idle, ids);
    doc = ma.merge(doc, 7, 1000, 500, a, ids);
    doc = mb.merge(doc, 9, 1000, 500, b, ids);
    expect(mb.n[0]).toBe(1);
    expect(mb.ids[0]).toBe(7000);
    expect(mb.vms).toBe(2);
    // a stops ticking: its section, written at 1000, is gone at 1501
    doc = mb.merge(doc, 9, 1501, 500, b, ids);
    expect(mb.n[0]).toBe(0);
    expect(mb.vms).toBe(1);
  });

  it("a VM lists its gauges while it sent within XVM_ACTIVE_MS or holds a request in flight", () => {
    const a = new Inflight();
    const s = a.slotFor("x:1");
    const m = new XvmMap();
    expect(m.active(0, a)).toBe(false);
    m.lastSendMs = 100;
    expect(m.active(100 + XVM_ACTIVE_MS, a)).toBe(true);
    expect(m.active(101 + XVM_ACTIVE_MS, a)).toBe(false);
    a.inc(s);
    expect(m.active(101 + XVM_ACTIVE_MS, a)).toBe(true);
  });

  it("beyond XVM_MAX_PEERS other VMs the address keeps the tick's count (not read)", () => {
    const ids = new FakeIds();
    let doc = new ArrayBuffer(0);
    for (let v = 0; v < XVM_MAX_PEERS + 1; v++) {
      const f = new Inflight();
      f.slotFor("x:1");
      const m = new XvmMap();
      m.lastSendMs = 1000;
      doc = m.merge(doc, <u32>(10 + v), 1000, 500, f, ids);
    }
    const me = new Inflight();
    me.slotFor("x:1");
    const mm = new XvmMap();
    mm.merge(doc, 99, 1000, 500, me, ids);
    expect(mm.n[0]).toBe(-1);
    expect(mm.vms).toBe(<f64>(XVM_MAX_PEERS + 2));
  });

  it("the other VMs' count: the gauges' sum, or -1 (keep the tick's) when none is listed or a read is refused", () => {
    const v = new StaticArray<u64>(XVM_MAX_PEERS);
    v[0] = 3; v[1] = 4;
    expect(peerCount(2, v)).toBe(7);
    expect(peerCount(0, v)).toBe(-1);
    expect(peerCount(-1, v)).toBe(-1);
    v[1] = u64.MAX_VALUE;
    expect(peerCount(2, v)).toBe(-1);
  });

  it("gauges that do not hold what their owner stored (a null stat, a hot restart's sum, a refused read) turn the reads off", () => {
    expect(gaugesHold(3, 3)).toBe(true);
    expect(gaugesHold(0, 0)).toBe(true);      // nothing stored to check against
    expect(gaugesHold(3, 0)).toBe(false);     // stats_matcher rejected it: a null gauge reads 0
    expect(gaugesHold(3, 5)).toBe(false);     // a hot restart's parent value added
    expect(gaugesHold(3, u64.MAX_VALUE)).toBe(false);
  });

  it("peekPair names the two candidates p2c then draws, and leaves the rng as it was", () => {
    const cands: Array<Candidate> = [];
    for (let i = 0; i < 5; i++) cands.push(cand("10.0.0." + i.toString() + ":80", 10 + i));
    const plan = new Plan(cands, 0.95);
    const inflight = new Array<i32>(20).fill(0);
    const out = new StaticArray<i32>(2);
    for (let k = 0; k < 50; k++) {
      const r1 = new Rng(<u32>(k + 1)), r2 = new Rng(<u32>(k + 1));
      expect(peekPair(plan, r1, 0, out)).toBe(true);
      expect(r1.state).toBe(r2.state);
      const p = pick(plan, inflight, 0, PICKER_P2C, 0, r2);
      expect(p.considered).toBe(2);
      const chosen = plan.slot[p.index];
      expect(chosen == out[0] || chosen == out[1]).toBe(true);
      // the same draw: with out[0]'s count raised p2c takes out[1], and the other way round
      const r3 = new Rng(<u32>(k + 1));
      inflight[out[0]] = 5;
      expect(plan.slot[pick(plan, inflight, 0, PICKER_P2C, 0, r3).index]).toBe(out[1]);
      inflight[out[0]] = 0;
    }
  });

  it("peekPair draws nothing where p2c does not (one eligible, or data that may be stale)", () => {
    const one = new Plan([cand("a:1", 0)], 0.95);
    const out = new StaticArray<i32>(2);
    const r = new Rng(1);
    expect(peekPair(one, r, 0, out)).toBe(false);
    const stale = new Plan([cand("a:1", 0, 10), cand("b:1", 1, 10)], 0.95);
    expect(peekPair(stale, r, 20, out)).toBe(false);
  });
});

describe("the error price with cross-VM counts (InbandTable.vms)", () => {
  it("a retry at a usual instance meets the proxy's share there, every VM's requests: fairN x the VMs sending", () => {
    const t = new InbandTable();
    t.sync(2, [0, 0]);
    t.onScrape(0, 0, 2, 1);    // the black hole: 2 ms answers
    t.onScrape(1, 0, 100, 1);  // a usual peer: E[S] 100 at c = 1
    t.fuseAll(0);
    t.esTyp[0] = 100;
    t.fairN[0] = 3;            // this VM usually holds 3 at an instance
    // typ (1 + n) / es: (100 x 4) / 2 with this VM's share, (100 x 7) / 2 with two VMs'
    expect(t.errScale(0)).toBeCloseTo(200, 9);
    t.vms = 2;
    expect(t.errScale(0)).toBeCloseTo(350, 9);
  });
});

describe("loadAware.crossVm", () => {
  it("defaults to on; false turns the gauges off; anything but a boolean is refused by name", () => {
    const base = '{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[]';
    expect(parseConfig(base + "}}").config!.loadAware.crossVm).toBe(true);
    expect(parseConfig(base + ',"crossVm":false}}').config!.loadAware.crossVm).toBe(false);
    expect(parseConfig(base + ',"crossVm":1}}').error.includes("loadAware.crossVm")).toBe(true);
  });
});
