import { Inflight } from "../assembly/lib/inflight";
import { PrefixIndex, PrefixMatch, isCheckpoint, CHECKPOINT_EVERY } from "../assembly/lib/request/prefix";
import { MeshOutbox, encodePrefixTrailer, checkPrefixTrailer, applyPrefixTrailer } from "../assembly/lib/mesh-prefix";
import { encodeReport, checkAnswer, MESH_HEADER_BYTES, MESH_ANSWER } from "../assembly/lib/mesh-inflight";

function hashes(n: i32, base: u64): StaticArray<u64> {
  const h = new StaticArray<u64>(n);
  for (let i = 0; i < n; i++) h[i] = base + <u64>i;
  return h;
}

/** Blocks base + i; those at `cps` made mesh checkpoints (bits 24-26 set), the others not. */
function chain(n: i32, base: u64, cps: Array<i32>): StaticArray<u64> {
  const h = new StaticArray<u64>(n);
  for (let i = 0; i < n; i++) h[i] = cps.includes(i) ? (base + <u64>i) | (<u64>7 << 24) : base + <u64>i;
  return h;
}

function blocksOf(ix: PrefixIndex, h: StaticArray<u64>, slot: i32, now: u64): i32 {
  const m = new PrefixMatch();
  ix.lookup(h, h.length, now, m);
  return m.blocksOf(slot);
}

/** One section, records given as (hash, address index), as the agent writes them. */
function trailer(service: string, addrs: Array<string>, hs: Array<u64>, ai: Array<u16>): ArrayBuffer {
  let size = 2 + 1 + String.UTF8.byteLength(service) + 2 + 2 + hs.length * 10;
  for (let i = 0; i < addrs.length; i++) size += 1 + String.UTF8.byteLength(addrs[i]);
  const b = new ArrayBuffer(size);
  const p = changetype<usize>(b);
  store<u16>(p, 1);
  let o = p + 2;
  const s = String.UTF8.encode(service);
  store<u8>(o, <u8>s.byteLength);
  memory.copy(o + 1, changetype<usize>(s), s.byteLength);
  o += 1 + <usize>s.byteLength;
  store<u16>(o, <u16>addrs.length);
  o += 2;
  for (let i = 0; i < addrs.length; i++) {
    const a = String.UTF8.encode(addrs[i]);
    store<u8>(o, <u8>a.byteLength);
    memory.copy(o + 1, changetype<usize>(a), a.byteLength);
    o += 1 + <usize>a.byteLength;
  }
  store<u16>(o, <u16>hs.length);
  o += 2;
  for (let k = 0; k < hs.length; k++) {
    store<u64>(o, hs[k]);
    store<u16>(o, ai[k], 8);
    o += 10;
  }
  return b;
}

describe("PrefixIndex.learnRemote (another proxy's placement)", () => {
  it("lets a lookup find the blocks another proxy sent to a slot", () => {
    const ix = new PrefixIndex(1024, 300000);
    const h = hashes(8, 100);
    for (let i = 0; i < 8; i++) expect(ix.learnRemote(h[i], 3, 1000)).toBe(true);
    expect(blocksOf(ix, h, 3, 1001)).toBe(8);
    expect(ix.learnRemote(h[0], 3, 1002)).toBe(false); // already known: nothing changes
  });

  it("never goes before this proxy's own slots, never displaces them; a new slot refreshes the entry, a known one does not", () => {
    const ix = new PrefixIndex(1024, 1000);
    const h = hashes(1, 500);
    ix.record(h, 1, 1, 0);
    ix.record(h, 1, 2, 0);
    ix.record(h, 1, 3, 0); // own: 3, 2, 1 (most recent first)
    expect(ix.learnRemote(h[0], 7, 10)).toBe(true); // behind them: 3, 2, 1, 7
    expect(ix.learnRemote(h[0], 8, 10)).toBe(true); // a full list: only the remote 7 (the last) is replaced
    expect(blocksOf(ix, h, 1, 20)).toBe(1);
    expect(blocksOf(ix, h, 2, 20)).toBe(1);
    expect(blocksOf(ix, h, 3, 20)).toBe(1);
    expect(blocksOf(ix, h, 8, 20)).toBe(1);
    expect(blocksOf(ix, h, 7, 20)).toBe(0);
    // own record of a new slot goes to the front and pushes the remote 8 out first
    ix.record(h, 1, 4, 30);
    expect(blocksOf(ix, h, 8, 40)).toBe(0);
    expect(blocksOf(ix, h, 1, 40)).toBe(1);
    // a remote send of a new slot is a send now: the entry ages from it (a full set evicts by it)
    const ix2 = new PrefixIndex(1024, 1000);
    ix2.record(h, 1, 1, 0);
    ix2.learnRemote(h[0], 2, 900);
    expect(blocksOf(ix2, h, 1, 1001)).toBe(1);
    expect(blocksOf(ix2, h, 2, 1001)).toBe(1);
    // a slot already listed changes nothing: the entry still ages from 900
    ix2.learnRemote(h[0], 2, 1800);
    expect(blocksOf(ix2, h, 2, 1901)).toBe(0);
  });

  it("ignores hash 0 and no slot, and is not offered back to the other VMs or proxies", () => {
    const ix = new PrefixIndex(1024, 300000);
    const out = new MeshOutbox(64);
    ix.meshRing = out.ring;
    expect(ix.learnRemote(0, 1, 0)).toBe(false);
    expect(ix.learnRemote(9, 0xffff, 0)).toBe(false);
    ix.learnRemote(9, 1, 0);
    expect(out.ring.end).toBe(0);
  });
});

describe("mesh checkpoints (only checkpoints and a placement's last block cross)", () => {
  it("picks about one block in CHECKPOINT_EVERY by its hash", () => {
    expect(CHECKPOINT_EVERY).toBe(8);
    expect(isCheckpoint(<u64>7 << 24)).toBe(true);
    expect(isCheckpoint(<u64>6 << 24)).toBe(false);
    let n = 0;
    let h: u64 = 0x9e3779b97f4a7c15;
    for (let i = 0; i < 8000; i++) { h = h * 6364136223846793005 + 1442695040888963407; if (isCheckpoint(h)) n++; }
    expect(n).toBeGreaterThan(900);
    expect(n).toBeLessThan(1100);
  });

  it("record() offers the other VMs every block, the other proxies the checkpoints and the last", () => {
    const ix = new PrefixIndex(1024, 300000);
    const out = new MeshOutbox(1024);
    const vm = new MeshOutbox(1024);
    ix.meshRing = out.ring;
    ix.ring = vm.ring;
    const h = chain(20, 1000, [7, 15]);
    ix.record(h, 20, 1, 0);
    expect(vm.ring.end).toBe(20);
    expect(out.ring.end).toBe(3);
    expect(out.ring.hashes[0]).toBe(h[7]);
    expect(out.ring.hashes[1]).toBe(h[15]);
    expect(out.ring.hashes[2]).toBe(h[19]);
  });

  it("a lookup whose walk stops credits up to the longest remote checkpoint, never beyond", () => {
    const ix = new PrefixIndex(1024, 300000);
    const h = chain(24, 2000, [3, 11, 19]);
    ix.record(h, 4, 1, 0); // own: blocks 0..3 at slot 1
    ix.learnRemote(h[3], 2, 0); // another proxy: blocks 0..3 at slot 2
    ix.learnRemote(h[11], 2, 0); // ... and 0..11
    ix.learnRemote(h[11], 3, 0); // and 0..11 at slot 3
    expect(blocksOf(ix, h, 1, 10)).toBe(4); // its own walk
    expect(blocksOf(ix, h, 2, 10)).toBe(12); // the longest checkpoint, not 19 or 24
    expect(blocksOf(ix, h, 3, 10)).toBe(12);
    // no own block 0: the checkpoint alone
    const g = chain(24, 2000, [3, 11, 19]);
    g[0] = 77;
    const rx = new PrefixIndex(1024, 300000);
    rx.learnRemote(h[11], 4, 0);
    expect(blocksOf(rx, g, 4, 10)).toBe(12);
    // the last block of a placement is a checkpoint of a request that ends there
    rx.learnRemote(h[23], 5, 0);
    expect(blocksOf(rx, h, 5, 10)).toBe(24);
    // an aged checkpoint credits nothing
    const old = new PrefixIndex(1024, 1000);
    old.learnRemote(h[11], 4, 0);
    expect(blocksOf(old, h, 4, 2000)).toBe(0);
  });

  it("without remote records a lookup is the walk alone (one proxy as before the mesh)", () => {
    const ix = new PrefixIndex(1024, 300000);
    const h = chain(16, 3000, [3, 7, 11, 15]);
    ix.record(h, 16, 1, 0);
    const b = chain(16, 3000, [3, 7, 11, 15]);
    b[5] = 99; // the chain breaks at block 5 (as an evicted block would)
    expect(blocksOf(ix, b, 1, 10)).toBe(5);
    ix.learnRemote(12345, 2, 10); // now in a mesh: past the break, the own checkpoint at 15 counts
    expect(blocksOf(ix, b, 1, 20)).toBe(16);
  });
});

describe("mesh prefix trailer", () => {
  it("carries the outbox's new records, oldest first, at most maxRecords per report", () => {
    const f = new Inflight();
    f.slotFor("10.0.0.1:8000");
    f.slotFor("10.0.0.2:8000");
    const ix = new PrefixIndex(1024, 300000);
    const out = new MeshOutbox(1024);
    ix.meshRing = out.ring;
    const h = chain(5, 100, [0, 1, 2, 3, 4]); // all checkpoints: each crosses the mesh
    ix.record(h, 5, 1, 0); // 5 new blocks to slot 1
    const t = encodePrefixTrailer(["llm"], [out], [3], f);
    const c = checkPrefixTrailer(t, 0);
    expect(c.ok).toBe(true, c.error);
    expect(c.records).toBe(3);
    expect(c.end).toBe(t.byteLength);
    expect(out.sent).toBe(3);
    // the receiver: the first three blocks at its own slot of that address
    const g = new Inflight();
    g.slotFor("10.0.0.9:8000");
    g.slotFor("10.0.0.8:8000");
    const s2 = g.slotFor("10.0.0.2:8000"); // another slot number than the sender's
    const rx = new PrefixIndex(1024, 300000);
    const r = applyPrefixTrailer(t, 0, ["llm"], [rx], g, 10);
    expect(r.learned).toBe(3);
    expect(blocksOf(rx, h, s2, 11)).toBe(3);
    // the next report takes the remaining two
    const t2 = encodePrefixTrailer(["llm"], [out], [3], f);
    expect(checkPrefixTrailer(t2, 0).records).toBe(2);
    applyPrefixTrailer(t2, 0, ["llm"], [rx], g, 12);
    expect(blocksOf(rx, h, s2, 13)).toBe(5);
    // nothing new: an empty section
    expect(checkPrefixTrailer(encodePrefixTrailer(["llm"], [out], [3], f), 0).records).toBe(0);
  });

  it("counts overrun records as dropped (a ring smaller than what waits)", () => {
    const out = new MeshOutbox(4);
    for (let i = 0; i < 10; i++) out.ring.push(<u64>(i + 1), 0);
    expect(out.take(100)).toBe(4);
    expect(out.dropped).toBe(6);
  });

  it("ignores and counts malformed records: hash 0, address index outside the table, unknown address or service", () => {
    const g = new Inflight();
    g.slotFor("a:1");
    const rx = new PrefixIndex(1024, 300000);
    const t = trailer("llm", ["a:1", "zz:9"], [11, 0, 12, 13], [0, 0, 5, 1]);
    expect(checkPrefixTrailer(t, 0).ok).toBe(true);
    const r = applyPrefixTrailer(t, 0, ["llm"], [rx], g, 0);
    expect(r.learned).toBe(1);
    expect(r.ignored).toBe(3);
    const other = applyPrefixTrailer(t, 0, ["chat"], [rx], g, 0);
    expect(other.learned).toBe(0);
    expect(other.ignored).toBe(4);
    const none = applyPrefixTrailer(t, 0, ["llm"], [null], g, 0);
    expect(none.ignored).toBe(4);
  });

  it("refuses a cut-off trailer at every length, and a version-2 answer with bytes after it", () => {
    const t = trailer("llm", ["a:1"], [11, 12], [0, 0]);
    for (let n = 0; n < t.byteLength; n++) expect(checkPrefixTrailer(t.slice(0, n), 0).ok).toBe(false);
    expect(checkPrefixTrailer(t, 0).ok).toBe(true);
    // a version-2 answer: the counts (none), then the trailer
    const f = new Inflight();
    const body = encodeReport(f, 7, 50, 1, t);
    store<u8>(changetype<usize>(body) + 1, MESH_ANSWER);
    const c = checkAnswer(body);
    expect(c.ok).toBe(true, c.error);
    expect(c.prefixAt).toBe(MESH_HEADER_BYTES);
    const longer = new ArrayBuffer(body.byteLength + 1);
    memory.copy(changetype<usize>(longer), changetype<usize>(body), body.byteLength);
    expect(checkAnswer(longer).ok).toBe(false);
    // version 1 has no trailer
    const v1 = encodeReport(f, 7, 50, 1);
    store<u8>(changetype<usize>(v1) + 1, MESH_ANSWER);
    expect(checkAnswer(v1).prefixAt).toBe(-1);
  });
});
