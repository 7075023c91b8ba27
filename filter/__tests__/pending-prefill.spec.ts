// The prefill sent ahead per instance (lib/pending-prefill.ts): charged and elapsing locally,
// exchanged between worker VMs through one shared-data document, bounded by the in-flight table.
import { Inflight } from "../assembly/lib/inflight";
import { PendingPrefill, PENDING_SECTION_HEADER_BYTES } from "../assembly/lib/pending-prefill";

describe("PendingPrefill: one VM", () => {
  it("a charge queues behind the earlier ones and elapses with time", () => {
    const p = new PendingPrefill();
    p.charge(2, 1000, 100);
    expect(p.aheadMs(2, 1000)).toBeCloseTo(100);
    p.charge(2, 1000, 50);                    // behind the first: done at 1150
    expect(p.own[2]).toBeCloseTo(1150);
    expect(p.aheadMs(2, 1100)).toBeCloseTo(50);
    expect(p.aheadMs(2, 1200)).toBe(0.0);
    p.charge(2, 1300, 10);                    // the queue had drained: starts now
    expect(p.own[2]).toBeCloseTo(1310);
    // nothing, an unknown slot, nothing to charge
    expect(p.aheadMs(0, 1000)).toBe(0.0);
    expect(p.aheadMs(-1, 1000)).toBe(0.0);
    expect(p.aheadMs(99, 1000)).toBe(0.0);
    p.charge(1, 1000, 0);
    p.charge(1, 1000, NaN);
    p.charge(1, 1000, Infinity);
    p.charge(-1, 1000, 10);
    expect(p.own[1]).toBe(0.0);
  });

  it("a slot the in-flight table freed (generation bumped) forgets its prefill", () => {
    const f = new Inflight();
    const a = f.slotFor("a:1");
    const p = new PendingPrefill();
    p.sync(f.capacity(), f.gen);
    p.charge(a, 0, 100000);
    p.sync(f.capacity(), f.gen);
    expect(p.aheadMs(a, 0)).toBeCloseTo(100000);
    f.beginEpoch();                            // a: no longer in any plan
    f.sweep(0, 10);
    f.sweep(20, 10);                           // freed
    p.sync(f.capacity(), f.gen);
    expect(p.aheadMs(a, 20)).toBe(0.0);
    expect(p.sentMs(a)).toBe(0.0);             // and all it was sent (round 9: the share of arrivals)
  });

  it("all the prefill sent to a slot adds up, done or not (the prompts it was made to hold)", () => {
    const p = new PendingPrefill();
    p.charge(2, 1000, 227);
    p.charge(2, 1000, 14.3);
    p.charge(2, 5000, 227);                    // long after the first two were done
    expect(p.sentMs(2)).toBeCloseTo(468.3);
    expect(p.sentMs(1)).toBe(0.0);
    p.charge(2, 6000, NaN);                    // charged nothing, adds nothing
    expect(p.sentMs(2)).toBeCloseTo(468.3);
    expect(p.sentMs(-1)).toBe(0.0);
    expect(p.sentMs(99)).toBe(0.0);
    p.grow(8);                                 // growing keeps it
    expect(p.sentMs(2)).toBeCloseTo(468.3);
  });
});

describe("PendingPrefill: exchanged between worker VMs", () => {
  it("a VM sees another VM's prefill ahead per address (its own slot numbering), elapsing with time", () => {
    const f1 = new Inflight(), f2 = new Inflight();
    const p1 = new PendingPrefill(), p2 = new PendingPrefill();
    f2.slotFor("b:1");                         // vm2 numbers the addresses the other way round
    const a1 = f1.slotFor("a:1");
    f1.slotFor("b:1");
    const a2 = f2.slotFor("a:1");
    p1.charge(a1, 1000, 300);
    let doc = p1.merge(new ArrayBuffer(0), 1, 1000, 500, f1);
    expect(p1.aheadMs(a1, 1000)).toBeCloseTo(300); // its own, not read back
    doc = p2.merge(doc, 2, 1100, 500, f2);
    expect(p2.aheadMs(a2, 1100)).toBeCloseTo(200);
    expect(p2.aheadMs(a2, 1250)).toBeCloseTo(50);
    expect(p2.aheadMs(f2.slotOf("b:1"), 1100)).toBe(0.0);
    // vm2's own charge adds to what vm1 sent
    p2.charge(a2, 1100, 100);
    expect(p2.aheadMs(a2, 1100)).toBeCloseTo(300);
    // vm2 publishes it on its next tick, vm1 reads it on its own: both price what the other sent
    doc = p2.merge(doc, 2, 1110, 500, f2);
    doc = p1.merge(doc, 1, 1120, 500, f1);
    expect(p1.aheadMs(a1, 1120)).toBeCloseTo(180 + 80);
  });

  it("sums the other VMs' prefill on one instance; sections age out; own sections are replaced", () => {
    const fs = [new Inflight(), new Inflight(), new Inflight()];
    const ps = [new PendingPrefill(), new PendingPrefill(), new PendingPrefill()];
    for (let k = 0; k < 3; k++) fs[k].slotFor("a:1");
    ps[0].charge(0, 1000, 100);
    ps[1].charge(0, 1000, 40);
    let doc = ps[0].merge(new ArrayBuffer(0), 1, 1000, 500, fs[0]);
    doc = ps[1].merge(doc, 2, 1000, 500, fs[1]);
    doc = ps[2].merge(doc, 3, 1010, 500, fs[2]);
    expect(ps[2].aheadMs(0, 1010)).toBeCloseTo(90 + 30);
    // vm1 rewrites its section (nothing ahead any more): one section per VM, never two
    const len = doc.byteLength;
    doc = ps[0].merge(doc, 1, 1200, 500, fs[0]);
    expect(doc.byteLength).toBe(len - 5 - 3);  // its record ("a:1", 1 + 3 + 4 bytes) gone
    // vm2's section (written at 1000) has expired by 1600: dropped from the document
    doc = ps[2].merge(doc, 3, 1600, 500, fs[2]);
    expect(doc.byteLength).toBe(2 * PENDING_SECTION_HEADER_BYTES);
  });

  it("never allocates a slot for an address it does not route to; bad input skipped or cut, never a trap", () => {
    const f1 = new Inflight(), f2 = new Inflight();
    const p1 = new PendingPrefill(), p2 = new PendingPrefill();
    p1.charge(f1.slotFor("x:1"), 0, 50);
    const doc = p1.merge(new ArrayBuffer(0), 1, 0, 500, f1);
    p2.merge(doc, 2, 0, 500, f2);
    expect(f2.size()).toBe(0);
    expect(f2.slotOf("x:1")).toBe(-1);
    // a record whose value is not a finite non-negative number is skipped and counted
    const a = f2.slotFor("x:1");
    const bad = doc.slice(0);
    store<f32>(changetype<usize>(bad) + <usize>(bad.byteLength - 4), NaN);
    p2.merge(bad, 2, 0, 500, f2);
    expect(p2.aheadMs(a, 0)).toBe(0.0);
    expect(p2.invalid).toBe(1);
    store<f32>(changetype<usize>(bad) + <usize>(bad.byteLength - 4), -5);
    p2.merge(bad, 2, 0, 500, f2);
    expect(p2.invalid).toBe(2);
    // truncated: the read stops there and the written document holds only the reader's section
    const cut = doc.slice(0, doc.byteLength - 2);
    const out = p2.merge(cut, 2, 0, 500, f2);
    expect(out.byteLength).toBe(PENDING_SECTION_HEADER_BYTES);
    expect(p2.aheadMs(a, 0)).toBe(0.0);
    // a count larger than the records present
    const junk = new ArrayBuffer(20);
    store<u16>(changetype<usize>(junk) + 12, 500);
    expect(p2.merge(junk, 2, 0, 500, f2).byteLength).toBe(PENDING_SECTION_HEADER_BYTES);
  });

  it("writes only the addresses with prefill ahead", () => {
    const f = new Inflight();
    const p = new PendingPrefill();
    const a = f.slotFor("a:1"), b = f.slotFor("bb:1");
    f.slotFor("c:1");
    p.charge(a, 0, 10);
    p.charge(b, 0, 100);
    expect(p.encodeOwn(7, 0, f.addresses()).byteLength).toBe(PENDING_SECTION_HEADER_BYTES + (5 + 3) + (5 + 4));
    expect(p.encodeOwn(7, 50, f.addresses()).byteLength).toBe(PENDING_SECTION_HEADER_BYTES + (5 + 4));
    expect(p.encodeOwn(7, 100, f.addresses()).byteLength).toBe(PENDING_SECTION_HEADER_BYTES);
  });
});
