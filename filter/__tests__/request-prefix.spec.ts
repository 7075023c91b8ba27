import { hashPromptBlocks, modelSeed, PrefixIndex, PrefixMatch, DEFAULT_BLOCK_BYTES, DEFAULT_MAX_BLOCKS, NO_SLOT, HEADER_BYTES, ENTRY_BYTES, WAYS } from "../assembly/lib/request/prefix";

/** n pseudo-random lowercase letters; different salts give different texts */
function text(n: i32, salt: i32 = 0): string {
  let x: u32 = <u32>salt * 2654435761 + 12345;
  let s = "";
  for (let i = 0; i < n; i++) {
    x = x * 1664525 + 1013904223;
    s += String.fromCharCode(0x61 + <i32>((x >> 16) % 26));
  }
  return s;
}

/** A block hash that lands in set `set` with tag `tag` (set = low bits, tag = high 32 bits). */
function inSet(set: u32, tag: u32): u64 {
  return (<u64>tag << 32) | <u64>set;
}

/** one hash as an array of one block */
function one(h: u64): StaticArray<u64> {
  const a = new StaticArray<u64>(1);
  a[0] = h;
  return a;
}

/** the slots `idx` holds block `h` for, as blocksOf(slot) */
function heldBy(idx: PrefixIndex, h: u64, slot: i32, nowMs: u64): i32 {
  const m = new PrefixMatch();
  idx.lookup(one(h), 1, nowMs, m);
  return m.blocksOf(slot);
}

/** hashes of one span covering the whole string */
function hashes(s: string, model: string = "m", blockBytes: i32 = DEFAULT_BLOCK_BYTES, maxBlocks: i32 = DEFAULT_MAX_BLOCKS): StaticArray<u64> {
  const b = String.UTF8.encode(s);
  const out = new StaticArray<u64>(maxBlocks);
  const n = hashPromptBlocks(b, [0, b.byteLength], modelSeed(model), blockBytes, maxBlocks, out);
  const r = new StaticArray<u64>(n);
  for (let i = 0; i < n; i++) r[i] = out[i];
  return r;
}

describe("hashPromptBlocks", () => {
  it("hashes full 64-byte blocks (the span's separator counts), never a partial one", () => {
    expect(hashes(text(62)).length).toBe(0);
    expect(hashes(text(63)).length).toBe(1); // 63 bytes + separator
    expect(hashes(text(200)).length).toBe(3);
  });

  it("chains: a block's hash identifies the whole prefix; equal prefixes give equal hashes", () => {
    const a = hashes(text(64 * 5) + "tail one");
    const b = hashes(text(64 * 5) + "another tail, longer");
    for (let i = 0; i < 5; i++) expect(a[i]).toBe(b[i]);
    const c = hashes("X" + text(64 * 5).substring(1));
    for (let i = 0; i < 5; i++) expect(c[i] != a[i]).toBe(true);
  });

  it("the model seeds the chain", () => {
    expect(hashes(text(128), "m1")[0] != hashes(text(128), "m2")[0]).toBe(true);
  });

  it("span boundaries: equal bytes at any offset hash alike; an extra boundary changes only what follows it", () => {
    const s = text(256);
    const b = String.UTF8.encode(s + "~" + s);
    // the same 256 bytes at offset 0 and at offset 257 (unaligned): equal hashes
    const o1 = new StaticArray<u64>(8);
    const o2 = new StaticArray<u64>(8);
    expect(hashPromptBlocks(b, [0, 256], modelSeed("m"), 64, 8, o1)).toBe(4);
    expect(hashPromptBlocks(b, [257, 513], modelSeed("m"), 64, 8, o2)).toBe(4);
    for (let i = 0; i < 4; i++) expect(o1[i]).toBe(o2[i]);
    // one span vs the same bytes split at 300: the blocks before the split are equal, the
    // separator shifts everything after it
    const out1 = new StaticArray<u64>(16);
    const out2 = new StaticArray<u64>(16);
    expect(hashPromptBlocks(b, [0, 256, 257, 513], modelSeed("m"), 64, 16, out1)).toBe(8);
    expect(hashPromptBlocks(b, [0, 256, 257, 300, 300, 513], modelSeed("m"), 64, 16, out2)).toBe(8);
    for (let i = 0; i < 4; i++) expect(out1[i]).toBe(out2[i]);
    expect(out1[5] != out2[5]).toBe(true);
  });

  it("stops at maxBlocks and rejects a block size that is not a multiple of 8", () => {
    expect(hashes(text(64 * 300), "m", 64, 256).length).toBe(256);
    const b = String.UTF8.encode(text(100));
    expect(hashPromptBlocks(b, [0, 100], 1, 12, 8, new StaticArray<u64>(8))).toBe(0);
    // spans outside the body are clamped, not read
    expect(hashPromptBlocks(b, [-50, 100000], 1, 8, 64, new StaticArray<u64>(64))).toBe(12);
  });
});

describe("PrefixIndex", () => {
  it("returns per slot the number of leading blocks it was sent", () => {
    const idx = new PrefixIndex(1024, 0);
    const a = hashes(text(64 * 8, 1));
    const b = hashes(text(64 * 3, 1) + text(64 * 5, 2)); // shares 3 blocks with a
    idx.record(a, a.length, 2, 1000);
    idx.record(b, b.length, 5, 1000);
    const m = new PrefixMatch();
    idx.lookup(a, a.length, 1000, m);
    expect(m.blocksOf(2)).toBe(8);
    expect(m.blocksOf(5)).toBe(3);
    expect(m.blocksOf(7)).toBe(0);
    const c = hashes(text(64 * 8, 9));
    idx.lookup(c, c.length, 1000, m);
    expect(m.slots.length).toBe(0);
  });

  it("a slot must hold every earlier block: a gap ends its match", () => {
    const idx = new PrefixIndex(1024, 0);
    const a = hashes(text(64 * 6, 3));
    idx.record(a, 2, 1, 0); // slot 1 was sent blocks 0..1
    const tail = new StaticArray<u64>(4);
    for (let i = 0; i < 4; i++) tail[i] = a[i + 2];
    idx.record(tail, 4, 4, 0); // slot 4 only blocks 2..5 (cannot hold a prefix without 0..1)
    const m = new PrefixMatch();
    idx.lookup(a, a.length, 0, m);
    expect(m.blocksOf(1)).toBe(2);
    expect(m.blocksOf(4)).toBe(0);
  });

  it("keeps the 4 most recent slots per block", () => {
    const idx = new PrefixIndex(64, 0);
    const a = hashes(text(64, 4));
    for (let s: u16 = 0; s < 6; s++) idx.record(a, a.length, s, 0);
    const m = new PrefixMatch();
    idx.lookup(a, a.length, 0, m);
    expect(m.slots.length).toBe(4);
    expect(m.blocksOf(5)).toBe(1);
    expect(m.blocksOf(2)).toBe(1);
    expect(m.blocksOf(1)).toBe(0);
    idx.record(a, a.length, NO_SLOT, 0); // ignored
    idx.lookup(a, a.length, 0, m);
    expect(m.slots.length).toBe(4);
  });

  it("a full set evicts its least recently recorded way, and only within that set", () => {
    const idx = new PrefixIndex(64, 0); // 8 sets of 8
    expect(idx.capacity()).toBe(64);
    expect(PrefixIndex.setsFor(64)).toBe(<u32>(64 / WAYS));
    // ways 0..WAYS-1 of set 3, recorded at 1..WAYS
    for (let k = 0; k < WAYS; k++) idx.record(one(inSet(3, 100 + <u32>k)), 1, <u16>k, <u64>(k + 1));
    idx.record(one(inSet(5, 100)), 1, 99, 50); // same tag, other set: a different block
    expect(idx.count()).toBe(WAYS + 1);
    expect(idx.evictions).toBe(0);
    for (let k = 0; k < WAYS; k++) expect(heldBy(idx, inSet(3, 100 + <u32>k), k, 51)).toBe(1); // every way found
    idx.record(one(inSet(3, 101)), 1, 1, 60); // recorded again: now the newest of set 3
    idx.record(one(inSet(3, 200)), 1, 77, 61); // set 3 is full: the way recorded at 1 goes
    expect(idx.evictions).toBe(1);
    expect(idx.count()).toBe(WAYS + 1);
    expect(heldBy(idx, inSet(3, 100), 0, 62)).toBe(0);
    expect(heldBy(idx, inSet(3, 101), 1, 62)).toBe(1);
    expect(heldBy(idx, inSet(3, 200), 77, 62)).toBe(1);
    expect(heldBy(idx, inSet(5, 100), 99, 62)).toBe(1);
    idx.record(one(inSet(3, 201)), 1, 78, 63); // next: the way recorded at 3 (101 was refreshed at 60)
    expect(heldBy(idx, inSet(3, 102), 2, 64)).toBe(0);
    expect(heldBy(idx, inSet(3, 101), 1, 64)).toBe(1);
    expect(heldBy(idx, inSet(3, 103), 3, 64)).toBe(1);
    expect(idx.evictions).toBe(2);
  });

  it("is bounded: a stream of distinct prompts never grows it past its capacity", () => {
    const idx = new PrefixIndex(256, 0);
    const bytes = idx.byteSize();
    for (let i = 0; i < 2000; i++) {
      const h = hashes(text(64 * 3, 100 + i));
      idx.record(h, h.length, <u16>(i & 7), <u64>i);
      expect(idx.count() <= 256).toBe(true);
    }
    expect(idx.count() > 256 - 16).toBe(true); // sets fill evenly: hardly a way left empty
    expect(idx.evictions).toBe(<u64>(2000 * 3 - idx.count()));
    expect(idx.byteSize()).toBe(bytes);
    // the last prompt is whole, the first long gone
    const last = hashes(text(64 * 3, 100 + 1999));
    const m = new PrefixMatch();
    idx.lookup(last, last.length, 2000, m);
    expect(m.blocksOf(1999 & 7)).toBe(3);
    const first = hashes(text(64 * 3, 100));
    idx.lookup(first, first.length, 2000, m);
    expect(m.blocksOf(0)).toBe(0);
  });

  it("capacity is configured entries rounded down to sets of WAYS (a power of two), at least one set", () => {
    expect(new PrefixIndex(32768, 0).capacity()).toBe(32768);
    expect(new PrefixIndex(1000, 0).capacity()).toBe(512);
    expect(new PrefixIndex(1, 0).capacity()).toBe(WAYS);
    expect(PrefixIndex.setsFor(32768)).toBe(32768 / WAYS);
  });

  it("eviction spares what is recorded again: a prompt in use survives a stream of distinct ones", () => {
    const idx = new PrefixIndex(256, 0);
    const hot = hashes(text(64 * 6, 30));
    const m = new PrefixMatch();
    for (let i = 0; i < 300; i++) {
      const d = hashes(text(64 * 2, 1000 + i));
      idx.record(d, d.length, <u16>(i & 3), <u64>(2 * i));
      idx.lookup(hot, hot.length, <u64>(2 * i + 1), m);
      expect(m.blocksOf(2)).toBe(i == 0 ? 0 : 6);
      idx.record(hot, hot.length, 2, <u64>(2 * i + 1));
    }
    expect(idx.evictions > 0).toBe(true);
    expect(idx.count() <= 256).toBe(true);
  });

  it("ages: an entry not recorded for maxAgeMs is absent and dropped", () => {
    const idx = new PrefixIndex(64, 1000);
    const a = hashes(text(64 * 2, 8));
    idx.record(a, 2, 3, 10000);
    const m = new PrefixMatch();
    idx.lookup(a, 2, 11000, m);
    expect(m.blocksOf(3)).toBe(2);
    idx.lookup(a, 2, 11001, m);
    expect(m.slots.length).toBe(0);
    expect(idx.expirations).toBe(1);
    expect(idx.count()).toBe(1);
  });

  it("withBudget: a budget of exactly bytesFor(n) holds n entries", () => {
    expect(PrefixIndex.withBudget(1024, PrefixIndex.bytesFor(1024), 0).capacity()).toBe(1024);
    expect(PrefixIndex.withBudget(1024, PrefixIndex.bytesFor(1024) - 1, 0).capacity()).toBe(512);
  });

  it("an empty prompt (no block) matches nothing, whatever the hash buffer still holds", () => {
    const idx = new PrefixIndex(1024, 0);
    const a = hashes(text(64 * 4, 5));
    idx.record(a, a.length, 3, 1000);
    const m = new PrefixMatch();
    idx.lookup(a, 0, 1000, m);
    expect(m.slots.length).toBe(0);
    expect(m.blocksOf(3)).toBe(0);
  });

  it("withBudget: capacity fits the byte budget; layout as documented (sets on a cache line)", () => {
    expect(PrefixIndex.bytesFor(1024)).toBe(HEADER_BYTES + 112 + 1024 * ENTRY_BYTES);
    expect(ENTRY_BYTES * WAYS).toBe(128);
    const idx = PrefixIndex.withBudget(1 << 20, 64 * 1024, 0);
    expect(idx.byteSize() <= 64 * 1024).toBe(true);
    expect(idx.capacity()).toBe(2048);
    const p = changetype<usize>(idx.buf);
    expect(load<u32>(p)).toBe(0x58505753);
    expect(load<u32>(p, 4)).toBe(2);
    expect(load<u32>(p, 8)).toBe(2048);
    expect(load<u32>(p, 12)).toBe(2048 / WAYS);
    const off = load<u32>(p, 24);
    expect(off >= <u32>HEADER_BYTES && off < <u32>(HEADER_BYTES + 128)).toBe(true);
    expect((p + <usize>off) & 127).toBe(0);
    expect(<i32>off + 2048 * ENTRY_BYTES <= idx.byteSize()).toBe(true);
    // an entry: tag (high 32 bits) at 0, then at, then the slots
    idx.record(one(inSet(5, 0xabcdef01)), 1, 7, 3);
    const ep = p + <usize>off + 5 * 128;
    expect(load<u32>(ep)).toBe(0xabcdef01);
    expect(load<u32>(ep, 4)).toBe(3);
    expect(load<u16>(ep, 8)).toBe(7);
    expect(load<u16>(ep, 10)).toBe(NO_SLOT);
  });

  it("an aged block past the first ends the match there and is dropped; the blocks before it count", () => {
    const idx = new PrefixIndex(1024, 1000);
    const a = hashes(text(64 * 6, 40));
    idx.record(a, a.length, 3, 0);
    idx.record(a, 2, 3, 900); // blocks 0..1 refreshed, 2..5 not
    const m = new PrefixMatch();
    idx.lookup(a, a.length, 1500, m);
    expect(m.blocksOf(3)).toBe(2);
    expect(idx.expirations).toBe(1);
    expect(idx.count()).toBe(5);
    // the same after a slot change in the middle (the match leaves its fast path first)
    const b = hashes(text(64 * 6, 41));
    idx.record(b, b.length, 1, 2000);
    idx.record(b, 3, 2, 2000); // blocks 0..2 → [2, 1], 3..5 → [1]
    idx.lookup(b, b.length, 2500, m);
    expect(m.blocksOf(2)).toBe(3);
    expect(m.blocksOf(1)).toBe(6);
    idx.record(b, 4, 1, 2900);
    idx.lookup(b, b.length, 3500, m); // blocks 4..5 aged (recorded at 2000)
    expect(m.blocksOf(1)).toBe(4);
    expect(m.blocksOf(2)).toBe(3); // an entry ages as a whole: slot 2 is still listed on 0..2
  });

  it("ages across the 32-bit clock: re-based entries keep their age and order, a wrap never revives one", () => {
    const t0: u64 = 1_700_000_000_000; // a real clock: the first use re-bases
    const aging = new PrefixIndex(64, 1000);
    aging.record(one(inSet(1, 1)), 1, 4, t0);
    expect(heldBy(aging, inSet(1, 1), 4, t0 + 1000)).toBe(1);
    expect(heldBy(aging, inSet(1, 1), 4, t0 + 1001)).toBe(0);
    aging.record(one(inSet(1, 2)), 1, 4, t0);
    // 2^32 ms later the low 32 bits of the clock equal t0's again: still aged, dropped by the re-base
    expect(heldBy(aging, inSet(1, 2), 4, t0 + 0x100000000)).toBe(0);
    expect(aging.count()).toBe(0);
    // without aging an entry stays across re-bases, and the set still evicts the older first
    const idx = new PrefixIndex(64, 0);
    idx.record(one(inSet(2, 1)), 1, 1, t0);
    idx.record(one(inSet(2, 2)), 1, 1, t0 + 10);
    const t1 = t0 + 0x90000000; // past 2^31 ms: re-based
    for (let k = 2; k < WAYS; k++) idx.record(one(inSet(2, 1 + <u32>k)), 1, 1, t1 + <u64>k);
    expect(heldBy(idx, inSet(2, 1), 1, t1 + 20)).toBe(1);
    idx.record(one(inSet(2, 100)), 1, 1, t1 + 21); // full: one of the two oldest goes
    expect(idx.evictions).toBe(1);
    let kept = 0;
    for (let k = 2; k < WAYS; k++) kept += heldBy(idx, inSet(2, 1 + <u32>k), 1, t1 + 22);
    expect(kept).toBe(WAYS - 2);
    expect(heldBy(idx, inSet(2, 1), 1, t1 + 22) + heldBy(idx, inSet(2, 2), 1, t1 + 22)).toBe(1);
    expect(idx.count()).toBe(WAYS);
  });

  it("an aged way is reused before a live one, counted as an expiration", () => {
    const idx = new PrefixIndex(WAYS, 100); // one set
    idx.record(one(inSet(0, 1)), 1, 1, 0);
    for (let k = 1; k < WAYS; k++) idx.record(one(inSet(0, 1 + <u32>k)), 1, 1, <u64>(150 + k));
    idx.record(one(inSet(0, 100)), 1, 1, 180); // tag 1 aged at 100
    expect(idx.evictions).toBe(0);
    expect(idx.expirations).toBe(1);
    expect(heldBy(idx, inSet(0, 2), 1, 190)).toBe(1);
    expect(heldBy(idx, inSet(0, 100), 1, 190)).toBe(1);
    expect(idx.count()).toBe(WAYS);
  });

  it("forgetSlot removes a slot everywhere", () => {
    const idx = new PrefixIndex(64, 0);
    const a = hashes(text(64 * 2, 9));
    idx.record(a, 2, 1, 0);
    idx.record(a, 2, 2, 0);
    idx.forgetSlot(1);
    const m = new PrefixMatch();
    idx.lookup(a, 2, 0, m);
    expect(m.blocksOf(1)).toBe(0);
    expect(m.blocksOf(2)).toBe(2);
  });
});
