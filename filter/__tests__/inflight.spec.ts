import { Inflight, Rng } from "../assembly/lib/inflight";

describe("Inflight", () => {
  it("counts per address and never goes below zero", () => {
    const f = new Inflight();
    const a = f.slotFor("10.0.0.1:80");
    expect(f.slotFor("10.0.0.1:80")).toBe(a);
    f.inc(a); f.inc(a); f.dec(a); f.dec(a); f.dec(a);
    expect(f.local[a]).toBe(0);
    expect(f.total[a]).toBe(0);
  });

  it("sums other VMs' sections, drops expired ones and replaces its own", () => {
    // both VMs plan the same two addresses (slotFor is called when a plan is built)
    const vm1 = new Inflight();
    const vm2 = new Inflight();
    vm2.slotFor("a:1");
    vm1.slotFor("b:1");
    const s1 = vm1.slotFor("a:1");
    vm1.inc(s1); vm1.inc(s1);
    let doc = vm1.merge(new ArrayBuffer(0), 1, 1000, 500);
    const s2 = vm2.slotFor("b:1");
    vm2.inc(s2);
    doc = vm2.merge(doc, 2, 1100, 500);
    expect(vm2.total[vm2.slotFor("a:1")]).toBe(2);
    expect(vm2.total[s2]).toBe(1);
    // vm1 reads vm2's section and replaces its own (no double count of itself)
    vm1.inc(s1);
    doc = vm1.merge(doc, 1, 1200, 500);
    expect(vm1.total[s1]).toBe(3);
    expect(vm1.total[vm1.slotFor("b:1")]).toBe(1);
    // vm2's section was written at 1100: expired at 1700
    doc = vm1.merge(doc, 1, 1700, 500);
    expect(vm1.total[vm1.slotFor("b:1")]).toBe(0);
  });

  it("reads every section of a document with several VMs, each entry once", () => {
    const vm1 = new Inflight(), vm2 = new Inflight(), vm3 = new Inflight();
    const a1 = vm1.slotFor("a:1"), b1 = vm1.slotFor("b:1");
    const a2 = vm2.slotFor("a:1"), b2 = vm2.slotFor("b:1");
    const a3 = vm3.slotFor("a:1"), b3 = vm3.slotFor("b:1");
    vm1.inc(a1); vm1.inc(a1); vm1.inc(b1);
    vm2.inc(a2); vm2.inc(a2); vm2.inc(a2); vm2.inc(b2); vm2.inc(b2);
    let doc = vm1.merge(new ArrayBuffer(0), 1, 1000, 500);
    doc = vm2.merge(doc, 2, 1000, 500);
    // vm3 sees both other sections, the second read from where the first one ends
    doc = vm3.merge(doc, 3, 1000, 500);
    expect(vm3.remote[a3]).toBe(5);
    expect(vm3.remote[b3]).toBe(3);
    // and writes both back with its own: vm1 then sees vm2's counts (vm3 has none)
    vm1.merge(doc, 1, 1000, 500);
    expect(vm1.remote[a1]).toBe(3);
    expect(vm1.remote[b1]).toBe(2);
    expect(vm1.total[a1]).toBe(5);
  });

  it("treats a malformed document as empty", () => {
    const f = new Inflight();
    const junk = new ArrayBuffer(20);
    store<u16>(changetype<usize>(junk) + 12, 500);
    const out = f.merge(junk, 1, 0, 10);
    expect(out.byteLength).toBe(14);
  });

  it("allocates nothing for addresses other VMs send that no plan of ours holds", () => {
    const other = new Inflight();
    for (let i = 0; i < 100; i++) other.inc(other.slotFor("10.0." + i.toString() + ".1:80"));
    const doc = other.merge(new ArrayBuffer(0), 2, 1000, 500);
    const f = new Inflight();
    const mine = f.slotFor("10.0.7.1:80");
    f.merge(doc, 1, 1000, 500);
    expect(f.capacity()).toBe(1);
    expect(f.total[mine]).toBe(1);
  });
});

describe("Inflight slot lifetime", () => {
  it("frees a slot no plan used for the grace, and reuses it", () => {
    const f = new Inflight();
    f.beginEpoch();
    const a = f.slotFor("a:1");
    const b = f.slotFor("b:1");
    f.beginEpoch(); // next snapshot: a is gone
    f.slotFor("b:1");
    expect(f.sweep(1000, 500)).toBe(0); // a unused from now
    expect(f.sweep(1499, 500)).toBe(0);
    expect(f.size()).toBe(2);
    expect(f.sweep(1500, 500)).toBe(1);
    expect(f.size()).toBe(1);
    f.beginEpoch();
    f.slotFor("b:1");
    expect(f.slotFor("c:1")).toBe(a); // a's slot, reused
    expect(f.capacity()).toBe(2);
    expect(f.slotFor("b:1")).toBe(b);
  });

  it("keeps a slot that comes back within the grace, counts included", () => {
    const f = new Inflight();
    f.beginEpoch();
    const a = f.slotFor("a:1");
    f.inc(a);
    f.beginEpoch();
    f.sweep(0, 500);
    f.sweep(400, 500);
    f.beginEpoch();
    expect(f.slotFor("a:1")).toBe(a);
    expect(f.sweep(10000, 500)).toBe(0);
    expect(f.local[a]).toBe(1);
  });

  it("a request that outlives its slot releases nothing from the slot's next address", () => {
    const f = new Inflight();
    f.beginEpoch();
    const a = f.slotFor("a:1");
    const held = f.acquire(a);
    const held2 = f.acquire(a);
    f.release(held2);
    expect(f.local[a]).toBe(1);
    f.beginEpoch();
    f.sweep(0, 100);
    expect(f.sweep(100, 100)).toBe(1); // a gone while one request still held it
    f.beginEpoch();
    const c = f.slotFor("c:1");
    expect(c).toBe(a);
    expect(f.total[c]).toBe(0);
    const hc = f.acquire(c);
    f.release(held); // the old request ends: c's count stays
    expect(f.local[c]).toBe(1);
    expect(f.total[c]).toBe(1);
    f.release(hc);
    expect(f.local[c]).toBe(0);
    f.release(hc); // twice: still never below zero
    expect(f.local[c]).toBe(0);
  });

  it("stays bounded by the live set while addresses churn, shared document included", () => {
    const f = new Inflight();
    let doc = new ArrayBuffer(0);
    const held = new Array<i64>();
    for (let round = 0; round < 200; round++) {
      f.beginEpoch();
      // 10 live addresses, all replaced every round; each gets a request that never ends
      for (let i = 0; i < 10; i++) held.push(f.acquire(f.slotFor("10." + round.toString() + "." + i.toString() + ".1:80")));
      f.sweep(<f64>round * 100, 250);
      doc = f.merge(doc, 1, <u64>round * 100, 1000);
    }
    // live 10 + what churned within the grace (2-3 rounds) + the round being freed
    expect(f.capacity()).toBeLessThanOrEqual(50);
    expect(f.size()).toBeLessThanOrEqual(50);
    expect(doc.byteLength).toBeLessThanOrEqual(14 + 50 * (5 + 14));
    for (let i = 0; i < held.length; i++) f.release(held[i]);
    for (let s = 0; s < f.capacity(); s++) expect(f.local[s]).toBe(0);
  });
});

describe("Inflight live slots after churn (issue 24 #2)", () => {
  it("liveList holds exactly the slots with an address; the top is given back and the lowest free slot reused", () => {
    const f = new Inflight();
    for (let i = 0; i < 100; i++) f.slotFor("a" + i.toString());  // churn: 100 addresses
    f.beginEpoch();
    const keep = f.slotFor("a5");                                     // the stable fleet: one low slot
    f.sweep(0, 10);
    expect(f.sweep(20, 10)).toBe(99);
    expect(f.liveList().length).toBe(1);
    expect(f.liveList()[0]).toBe(keep);
    expect(f.capacity()).toBe(keep + 1);                              // slots above the live one given back
    expect(f.size()).toBe(1);
    // reuse takes the lowest free slot, so the table stays as small as the live set
    expect(f.slotFor("b")).toBe(0);
    expect(f.liveList().length).toBe(2);
  });

  it("a request holding a slot given back at the top releases nothing, also after the slot regrows", () => {
    const f = new Inflight();
    f.slotFor("a");
    const top = f.slotFor("b");
    const h = f.acquire(top);
    f.beginEpoch();
    f.slotFor("a");
    f.sweep(0, 10);
    f.sweep(20, 10);                                                  // b freed, its slot trimmed
    expect(f.capacity()).toBe(1);
    const again = f.slotFor("c");                                     // regrows at the same index
    expect(again).toBe(top);
    f.inc(again);
    f.release(h);                                                     // b's old handle
    expect(f.local[again]).toBe(1);
  });

  it("merge and encode see only the live slots' counts", () => {
    const f = new Inflight();
    for (let i = 0; i < 50; i++) f.slotFor("x" + i.toString());
    f.beginEpoch();
    const s = f.slotFor("x49");
    f.inc(s);
    f.sweep(0, 10);
    f.sweep(20, 10);
    expect(f.liveList().length).toBe(1);
    const doc = f.merge(new ArrayBuffer(0), 7, 100, 1000);
    const g = new Inflight();
    const t = g.slotFor("x49");
    g.merge(doc, 8, 100, 1000);
    expect(g.remote[t]).toBe(1);
  });
});

describe("Rng", () => {
  it("is deterministic and in [0, 1)", () => {
    const a = new Rng(42);
    const b = new Rng(42);
    for (let i = 0; i < 1000; i++) {
      const x = a.next();
      expect(x).toBe(b.next());
      expect(x >= 0 && x < 1).toBe(true);
    }
  });
});

describe("Inflight.rebase", () => {
  it("moves the reference point only when the scrape changes", () => {
    const f = new Inflight();
    const s = f.slotFor("a:1");
    expect(f.rebase(s, 1000)).toBe(0);
    f.inc(s); f.inc(s);
    // the agent republishes the same scrape: requests sent since it keep counting
    expect(f.rebase(s, 1000)).toBe(0);
    expect(f.rebase(s, 1001)).toBe(0); // same scrape, ms rounding
    // a new scrape already sees our two requests in its queue
    expect(f.rebase(s, 2000)).toBe(2);
  });
});
