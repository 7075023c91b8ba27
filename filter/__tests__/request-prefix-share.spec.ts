import { hashPromptBlocks, modelSeed, PrefixIndex, PrefixMatch, isCheckpoint } from "../assembly/lib/request/prefix";
import { PrefixShare, ShareRing, MAX_RING, SECTION_HEADER_BYTES, RECORD_BYTES, MAX_DOC_RECORDS, MIN_SECTION_RECORDS } from "../assembly/lib/request/prefix-share";
import { Inflight } from "../assembly/lib/inflight";

function text(n: i32, salt: i32 = 0): string {
  let x: u32 = <u32>salt * 2654435761 + 12345;
  let s = "";
  for (let i = 0; i < n; i++) {
    x = x * 1664525 + 1013904223;
    s += String.fromCharCode(0x61 + <i32>((x >> 16) % 26));
  }
  return s;
}

function hashes(s: string): StaticArray<u64> {
  const b = String.UTF8.encode(s);
  const out = new StaticArray<u64>(256);
  const n = hashPromptBlocks(b, [0, b.byteLength], modelSeed("m"), 64, 256, out);
  const r = new StaticArray<u64>(n);
  for (let i = 0; i < n; i++) r[i] = out[i];
  return r;
}

/** One worker VM: its own slot numbering of the fleet, index and share state. */
class Vm {
  inflight: Inflight = new Inflight();
  index: PrefixIndex;
  share: PrefixShare;
  constructor(public token: u32, addrs: Array<string>, entries: i32 = 4096, maxAgeMs: u64 = 0) {
    this.index = new PrefixIndex(entries, maxAgeMs);
    this.share = new PrefixShare(entries);
    this.index.ring = this.share.ring;
    this.inflight.beginEpoch();
    for (let i = 0; i < addrs.length; i++) this.inflight.slotFor(addrs[i]);
  }
  slot(addr: string): u16 { return <u16>this.inflight.slotOf(addr); }
  /** one tick's exchange against the shared document `doc` (returns the document written back) */
  tick(doc: ArrayBuffer, nowMs: u64, maxAgeMs: u64 = 1000): ArrayBuffer {
    const out = this.share.merge(doc, this.token, nowMs, maxAgeMs, this.index, this.inflight);
    this.share.ring.published();
    return out;
  }
  held(h: StaticArray<u64>, addr: string, nowMs: u64): i32 {
    const m = new PrefixMatch();
    this.index.lookup(h, h.length, nowMs, m);
    return m.blocksOf(<i32>this.slot(addr));
  }
}

const A1 = "10.0.0.1:80";
const A2 = "10.0.0.2:80";
const A3 = "10.0.0.3:80";

describe("PrefixShare: the prefix index across worker VMs", () => {
  it("a prompt routed by one VM is known to another after one exchange, under that VM's own slot for the address", () => {
    const v1 = new Vm(1, [A1, A2, A3]);
    const v2 = new Vm(2, [A3, A2, A1]); // other slot numbers for the same addresses
    const p = hashes(text(64 * 10, 1));
    v1.index.record(p, p.length, v1.slot(A1), 100);
    expect(v2.held(p, A1, 100)).toBe(0);
    let doc = v1.tick(new ArrayBuffer(0), 110);
    doc = v2.tick(doc, 115);
    expect(v2.held(p, A1, 120)).toBe(10);
    expect(v2.held(p, A3, 120)).toBe(0); // A3 is v1's slot 2 = v2's slot 0: not confused
    expect(v2.share.learned).toBe(10);
    // the same section read again is not applied again
    v2.tick(doc, 125);
    expect(v2.share.learned).toBe(10);
    // nor does v2 offer back what it learnt
    expect(v2.share.ring.end).toBe(0);
  });

  it("forwards to the mesh outbox only the other VM's checkpoints (a VM record carries no position)", () => {
    const v1 = new Vm(1, [A1, A2]);
    const v2 = new Vm(2, [A2, A1]);
    const p = hashes(text(64 * 100, 7));
    let cps = 0;
    for (let i = 0; i < p.length; i++) if (isCheckpoint(p[i])) cps++;
    expect(cps).toBeGreaterThan(0);
    expect(cps).toBeLessThan(p.length / 3);
    v1.index.record(p, p.length, v1.slot(A1), 100);
    const outbox = new ShareRing(1024);
    const doc = v1.tick(new ArrayBuffer(0), 110);
    v2.share.merge(doc, v2.token, 115, 1000, v2.index, v2.inflight, outbox);
    expect(v2.share.learned).toBe(100); // the other VM learns every block
    expect(outbox.end).toBe(<u64>cps); // the other proxies the checkpoints
    for (let k = 0; k < cps; k++) expect(isCheckpoint(outbox.hashes[k])).toBe(true);
  });

  it("re-recording identical blocks offers nothing new; a changed front slot does, and so does an entry recorded in an earlier quarter of maxAge", () => {
    const v = new Vm(1, [A1, A2], 4096, 1000);
    const p = hashes(text(64 * 4, 2));
    v.index.record(p, p.length, v.slot(A1), 0);
    expect(v.share.ring.end).toBe(4);
    const m = new PrefixMatch();
    v.index.lookup(p, p.length, 10, m);
    v.index.record(p, p.length, v.slot(A1), 10); // same slot: refreshed only
    expect(v.share.ring.end).toBe(4);
    expect(v.held(p, A1, 1005)).toBe(4); // refreshed at 10: not aged at 1005
    v.index.record(p, p.length, v.slot(A2), 20); // another instance: offered
    expect(v.share.ring.end).toBe(8);
    v.index.record(p, p.length, v.slot(A2), 249); // same window [0, 250)
    expect(v.share.ring.end).toBe(8);
    v.index.record(p, p.length, v.slot(A2), 250); // last recorded in the window before: offered again
    expect(v.share.ring.end).toBe(12);
    v.index.record(p, p.length, v.slot(A2), 499);
    expect(v.share.ring.end).toBe(12);
    // in steady use an entry is offered once per window: another VM's copy never ages out
    for (let t: u64 = 500; t < 3000; t += 50) v.index.record(p, p.length, v.slot(A2), t);
    expect(v.share.ring.end).toBe(12 + 10 * 4);
  });

  it("a learnt block is not offered back in the window it was learnt in", () => {
    const v1 = new Vm(1, [A1], 4096, 1000);
    const v2 = new Vm(2, [A1], 4096, 1000);
    const p = hashes(text(64 * 3, 13));
    v1.index.record(p, p.length, v1.slot(A1), 300);
    v2.tick(v1.tick(new ArrayBuffer(0), 310), 320);
    expect(v2.share.learned).toBe(3);
    v2.index.record(p, p.length, v2.slot(A1), 330); // same instance, same window [250, 500)
    expect(v2.share.ring.end).toBe(0);
    v2.index.record(p, p.length, v2.slot(A1), 510);
    expect(v2.share.ring.end).toBe(3);
  });

  it("a section carries two publications: a reader whose tick slips one still gets every record once", () => {
    const v1 = new Vm(1, [A1, A2]);
    const v2 = new Vm(2, [A1, A2]);
    const a = hashes(text(64 * 3, 3));
    const b = hashes(text(64 * 3, 4));
    const c = hashes(text(64 * 3, 5));
    v1.index.record(a, a.length, v1.slot(A1), 0);
    let doc = v1.tick(new ArrayBuffer(0), 10);
    doc = v2.tick(doc, 11);
    v1.index.record(b, b.length, v1.slot(A2), 12);
    doc = v1.tick(doc, 20);
    v1.index.record(c, c.length, v1.slot(A1), 22);
    doc = v1.tick(doc, 30); // v1 published twice since v2 last read
    doc = v2.tick(doc, 31);
    expect(v2.held(a, A1, 40)).toBe(3);
    expect(v2.held(b, A2, 40)).toBe(3);
    expect(v2.held(c, A1, 40)).toBe(3);
    expect(v2.share.learned).toBe(9);
    expect(v2.share.missed).toBe(0);
    // three publications between two reads: the oldest batch is gone, and counted
    const d = hashes(text(64 * 2, 6));
    const e = hashes(text(64 * 2, 7));
    const f = hashes(text(64 * 2, 8));
    v1.index.record(d, d.length, v1.slot(A1), 40);
    doc = v1.tick(doc, 40);
    v1.index.record(e, e.length, v1.slot(A1), 41);
    doc = v1.tick(doc, 50);
    v1.index.record(f, f.length, v1.slot(A1), 51);
    doc = v1.tick(doc, 60);
    doc = v2.tick(doc, 61);
    expect(v2.held(d, A1, 70)).toBe(0);
    expect(v2.held(f, A1, 70)).toBe(2);
    expect(v2.share.missed).toBe(2);
  });

  it("is bounded: the ring and the section hold at most min(entries, MAX_RING) records, overruns are counted", () => {
    expect(new ShareRing(32768).capacity()).toBe(MAX_RING);
    expect(new ShareRing(1000).capacity()).toBe(512);
    expect(new ShareRing(0).capacity()).toBe(1);
    const v = new Vm(1, [A1], 64);
    for (let i = 0; i < 50; i++) {
      const h = hashes(text(64 * 4, 100 + i));
      v.index.record(h, h.length, v.slot(A1), <u64>i);
    }
    expect(v.share.ring.end).toBe(200);
    const doc = v.tick(new ArrayBuffer(0), 100);
    expect(doc.byteLength).toBe(SECTION_HEADER_BYTES + 1 + A1.length + 64 * RECORD_BYTES);
    expect(v.share.ring.dropped).toBe(136);
  });

  it("bounds the whole document: with many VMs each section keeps an equal share of the newest records", () => {
    let doc = new ArrayBuffer(0);
    const vms = new Array<Vm>();
    for (let t = 0; t < 8; t++) vms.push(new Vm(<u32>(t + 1), [A1]));
    for (let t = 0; t < 8; t++) {
      const v = vms[t];
      for (let i = 0; i < 1024; i++) {
        const h = hashes(text(64 * 4, t * 10000 + i));
        v.index.record(h, h.length, 0, 0);
      }
      expect(v.share.ring.end).toBe(4096);
      doc = v.tick(doc, 10);
    }
    // each VM's share follows the sections it saw; once every VM has ticked with all 8 present
    // (its section still carries its last batch), each holds MAX_DOC_RECORDS / 8
    for (let t = 0; t < 8; t++) doc = vms[t].tick(doc, 11);
    const last = vms[7];
    expect(MAX_DOC_RECORDS / 8 >= MIN_SECTION_RECORDS).toBe(true);
    // a VM that reads every section learns at most the document's bound
    const reader = new Vm(99, [A1], 32768);
    reader.tick(doc, 12);
    expect(<i32>reader.share.learned).toBe(MAX_DOC_RECORDS);
    expect(reader.share.learned >= <u64>(MAX_DOC_RECORDS / 8)).toBe(true);
    expect(doc.byteLength).toBe(8 * (SECTION_HEADER_BYTES + 1 + A1.length) + MAX_DOC_RECORDS * RECORD_BYTES);
    // the newest records are the ones kept: the last prompt the 8th VM recorded is learnt
    const newest = hashes(text(64 * 4, 7 * 10000 + 1023));
    const m = new PrefixMatch();
    reader.index.lookup(newest, newest.length, 13, m);
    expect(m.blocksOf(<i32>reader.slot(A1))).toBe(4);
    expect(last.share.ring.end).toBe(4096);
  });

  it("drops sections of VMs that stopped publishing, keeps live ones, replaces its own", () => {
    const v1 = new Vm(1, [A1]);
    const v2 = new Vm(2, [A1]);
    const v3 = new Vm(3, [A1]);
    let doc = v1.tick(new ArrayBuffer(0), 0);
    doc = v2.tick(doc, 500);
    const two = doc.byteLength;
    doc = v2.tick(doc, 600);
    expect(doc.byteLength).toBe(two); // own section replaced, not appended
    doc = v3.tick(doc, 1200); // v1's section (at 0) is older than maxAge 1000
    expect(doc.byteLength).toBe(two);
    const p = hashes(text(64 * 2, 9));
    v1.index.record(p, p.length, 0, 1200);
    doc = v1.tick(doc, 1210); // v1 is back
    doc = v3.tick(doc, 1220);
    expect(v3.held(p, A1, 1230)).toBe(2);
  });

  it("skips addresses the reader does not route to and never allocates slots for them", () => {
    const v1 = new Vm(1, [A1, A2]);
    const v2 = new Vm(2, [A1]);
    const p = hashes(text(64 * 2, 10));
    v1.index.record(p, p.length, v1.slot(A2), 0);
    v2.tick(v1.tick(new ArrayBuffer(0), 1), 2);
    expect(v2.share.learned).toBe(0);
    expect(v2.inflight.size()).toBe(1);
    expect(v2.index.count()).toBe(0);
    v2.index.learn(0, 0, 3); // 0 is never a block hash: a document carrying it adds nothing
    expect(v2.index.count()).toBe(0);
  });

  it("a record naming an address index past the section's table is skipped, at exactly the count too", () => {
    const v1 = new Vm(1, [A1]);
    const p = hashes(text(64 * 2, 12));
    v1.index.record(p, p.length, 0, 0);
    const doc = v1.tick(new ArrayBuffer(0), 1);
    const nAddr = <i32>load<u16>(changetype<usize>(doc), 20);
    const nRec = <i32>load<u32>(changetype<usize>(doc), 22);
    expect(nAddr).toBe(1);
    expect(nRec).toBeGreaterThan(0);
    const recAt = SECTION_HEADER_BYTES + 1 + A1.length;
    for (let k = 0; k < 2; k++) {
      const bad = doc.slice(0);
      for (let r = 0; r < nRec; r++) store<u16>(changetype<usize>(bad) + <usize>(recAt + r * RECORD_BYTES), <u16>(nAddr + k), 8);
      const v2 = new Vm(2, [A1, A2, A3]);
      v2.tick(bad, 2);
      expect(v2.share.learned).toBe(0);
      expect(v2.index.count()).toBe(0);
    }
    // the same document with its index intact applies
    const v3 = new Vm(3, [A1]);
    v3.tick(doc, 2);
    expect(v3.share.learned).toBe(<u64>nRec);
    expect(v3.held(p, A1, 3)).toBe(2);
  });

  it("malformed documents end the read without a trap: the returned document is valid", () => {
    const v1 = new Vm(1, [A1]);
    const p = hashes(text(64 * 2, 11));
    v1.index.record(p, p.length, 0, 0);
    const good = v1.tick(new ArrayBuffer(0), 1);
    const v2 = new Vm(2, [A1]);
    // a section claiming more records than there are bytes
    const bad = good.slice(0);
    store<u32>(changetype<usize>(bad), 0xffffff, 22);
    const back = v2.tick(bad, 2);
    expect(v2.share.learned).toBe(0);
    expect(back.byteLength).toBe(SECTION_HEADER_BYTES); // only v2's own (empty) section
    // truncated, and garbage
    v2.tick(good.slice(0, good.byteLength - 3), 3);
    const junk = new ArrayBuffer(57);
    for (let i = 0; i < 57; i++) store<u8>(changetype<usize>(junk) + i, <u8>(i * 37 + 11));
    v2.tick(junk, 4);
    expect(v2.share.learned).toBe(0);
    // the good document still applies
    v2.tick(good, 5);
    expect(v2.held(p, A1, 6)).toBe(2);
  });
});

describe("PrefixIndex.record after lookup", () => {
  it("reuses the entries lookup found only for the same hashes", () => {
    const idx = new PrefixIndex(1024, 0);
    const a = hashes(text(64 * 6, 20));
    idx.record(a, a.length, 1, 0);
    const m = new PrefixMatch();
    idx.lookup(a, a.length, 0, m);
    // the same array now holds another prompt: record must not use the entries found for a
    const b = hashes(text(64 * 6, 21));
    for (let i = 0; i < a.length; i++) a[i] = b[i];
    idx.record(a, a.length, 2, 0);
    const a2 = hashes(text(64 * 6, 20));
    idx.lookup(a2, a2.length, 0, m);
    expect(m.blocksOf(1)).toBe(6);
    expect(m.blocksOf(2)).toBe(0);
    idx.lookup(b, b.length, 0, m);
    expect(m.blocksOf(2)).toBe(6);
    // a longer prompt sharing 6 blocks: lookup found 6, record reuses them and inserts the rest
    const c = hashes(text(64 * 6, 20) + text(64 * 4, 22));
    idx.lookup(c, c.length, 0, m);
    expect(m.blocksOf(1)).toBe(6);
    idx.record(c, c.length, 3, 0);
    idx.lookup(c, c.length, 0, m);
    expect(m.blocksOf(3)).toBe(c.length);
    expect(m.blocksOf(1)).toBe(6);
    expect(idx.count()).toBe(6 + 6 + c.length - 6);
  });
});
