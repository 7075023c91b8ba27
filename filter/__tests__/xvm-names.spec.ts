import { claimName, NameClaim, XVM_NAME_RECORD_BYTES } from "../assembly/lib/xvm-names";
import { XvmMap, XVM_NO_GAUGE } from "../assembly/lib/xvm";
import { Inflight } from "../assembly/lib/inflight";
import { GaugeIds } from "../assembly/lib/xvm";

const MAX_AGE: u64 = 200;

function claim(doc: ArrayBuffer, token: u32, now: u64): NameClaim {
  return claimName(doc, token, now, MAX_AGE, new NameClaim());
}

class NoIds extends GaugeIds {
  id(token: u32, slot: i32): u32 { return token * 1000 + <u32>slot; }
}

describe("cross-VM gauge names (lib/xvm-names.ts)", () => {
  it("gives each VM alive at once its own name, from 1 up, and the same one when it renews", () => {
    let doc = new ArrayBuffer(0);
    const a = claim(doc, 0x1001, 1000); doc = a.doc;
    const b = claim(doc, 0x2002, 1005); doc = b.doc;
    expect(a.name).toBe(1);
    expect(b.name).toBe(2);
    const a2 = claim(doc, 0x1001, 1020); doc = a2.doc;
    expect(a2.name).toBe(1);
    expect(doc.byteLength).toBe(2 * XVM_NAME_RECORD_BYTES);
  });

  it("a name not renewed within maxAge goes to the next VM: 100 VM restarts, one worker at a time, use two names", () => {
    let doc = new ArrayBuffer(0);
    let now: u64 = 1000;
    const other = claim(doc, 7, now); doc = other.doc;
    let maxName: u32 = 0;
    for (let k = 0; k < 100; k++) {
      // a VM starts (new token), renews for a while, then is gone (a reload after a failure)
      const token = <u32>(100 + k);
      for (let t = 0; t < 5; t++) {
        const c = claim(doc, token, now); doc = c.doc;
        if (c.name > maxName) maxName = c.name;
        doc = claim(doc, 7, now).doc; // the other worker keeps its name
        now += 20;
      }
      now += MAX_AGE + 1;
      doc = claim(doc, 7, now).doc;
    }
    expect(maxName).toBe(2);
    expect(doc.byteLength).toBe(2 * XVM_NAME_RECORD_BYTES);
  });

  it("never takes a name renewed within maxAge, even one renewed at a later time than this VM's clock reads", () => {
    let doc = claim(new ArrayBuffer(0), 1, 1000).doc;
    // VM 2 reads a clock 1 ms behind VM 1's renewal
    const c = claim(doc, 2, 999);
    expect(c.name).toBe(2);
    // VM 1 renewed exactly maxAge ago: still its own
    expect(claim(doc, 3, 1000 + MAX_AGE).name).toBe(2);
    expect(claim(doc, 3, 1000 + MAX_AGE + 1).name).toBe(1);
  });

  it("a VM whose name was taken while it stalled gets another, not the one now held", () => {
    let doc = claim(new ArrayBuffer(0), 1, 1000).doc;
    doc = claim(doc, 2, 1300).doc; // VM 1 stalled past maxAge: VM 2 takes name 1
    expect(claim(doc, 2, 1310).name).toBe(1);
    const back = claim(doc, 1, 1320);
    expect(back.name).toBe(2);
  });

  it("reads a document that is not whole records as empty (every name free), never out of bounds", () => {
    const bad = new ArrayBuffer(XVM_NAME_RECORD_BYTES + 5);
    const c = claim(bad, 9, 1000);
    expect(c.name).toBe(1);
    expect(c.doc.byteLength).toBe(XVM_NAME_RECORD_BYTES);
  });
});

describe("the gauge map lists only gauges this VM wrote (XvmMap.encodeOwn with `own`)", () => {
  it("a live slot with no gauge defined under the current name is not listed, so another VM keeps its tick count there", () => {
    const a = new Inflight(), b = new Inflight();
    a.slotFor("x:1"); a.slotFor("y:1");
    b.slotFor("x:1"); b.slotFor("y:1");
    const ma = new XvmMap(), mb = new XvmMap();
    ma.lastSendMs = 1000; mb.lastSendMs = 1000;
    const ids = new NoIds();
    // VM a took over a name: it has written the gauge of x's slot only
    const own: Array<u32> = [XVM_NO_GAUGE, XVM_NO_GAUGE];
    own[a.slotOf("x:1")] = 5;
    let doc = ma.merge(new ArrayBuffer(0), 1, 1000, 500, a, ids, own);
    doc = mb.merge(doc, 2, 1005, 500, b, ids);
    expect(mb.n[b.slotOf("x:1")]).toBe(1);
    expect(mb.n[b.slotOf("y:1")]).toBe(0);
    // without `own` every live slot is listed (the earlier behaviour)
    doc = ma.merge(doc, 1, 1010, 500, a, ids);
    mb.merge(doc, 2, 1015, 500, b, ids);
    expect(mb.n[b.slotOf("y:1")]).toBe(1);
  });
});
