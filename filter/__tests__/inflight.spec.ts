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
    const vm1 = new Inflight();
    const vm2 = new Inflight();
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

  it("treats a malformed document as empty", () => {
    const f = new Inflight();
    const junk = new ArrayBuffer(20);
    store<u16>(changetype<usize>(junk) + 12, 500);
    const out = f.merge(junk, 1, 0, 10);
    expect(out.byteLength).toBe(14);
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
