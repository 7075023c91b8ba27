import { hashPromptBlocks, modelSeed, PrefixIndex, PrefixMatch, DEFAULT_BLOCK_BYTES, DEFAULT_MAX_BLOCKS, NO_SLOT, HEADER_BYTES, ENTRY_BYTES } from "../assembly/lib/request/prefix";

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

  it("is bounded: evicts the least recently recorded entry when full", () => {
    const idx = new PrefixIndex(8, 0);
    const a = hashes(text(64 * 4, 5));
    const b = hashes(text(64 * 4, 6));
    const c = hashes(text(64 * 4, 7));
    idx.record(a, 4, 1, 0);
    idx.record(b, 4, 2, 0);
    idx.record(a, 4, 1, 1); // a is now the most recent
    idx.record(c, 4, 3, 2); // evicts b's 4 entries
    expect(idx.count()).toBe(8);
    expect(idx.evictions).toBe(4);
    const m = new PrefixMatch();
    idx.lookup(b, 4, 3, m);
    expect(m.slots.length).toBe(0);
    idx.lookup(a, 4, 3, m);
    expect(m.blocksOf(1)).toBe(4);
    idx.lookup(c, 4, 3, m);
    expect(m.blocksOf(3)).toBe(4);
    // a stream of distinct prompts never grows it
    for (let i = 0; i < 200; i++) {
      const h = hashes(text(64 * 3, 100 + i));
      idx.record(h, h.length, <u16>(i & 7), <u64>i);
    }
    expect(idx.count()).toBe(8);
  });

  it("eviction spares what is recorded again: a prompt in use survives a stream of distinct ones", () => {
    const idx = new PrefixIndex(64, 0);
    const hot = hashes(text(64 * 6, 30));
    const m = new PrefixMatch();
    for (let i = 0; i < 300; i++) {
      idx.lookup(hot, hot.length, <u64>i, m);
      idx.record(hot, hot.length, 2, <u64>i);
      const d = hashes(text(64 * 8, 1000 + i));
      idx.record(d, d.length, <u16>(i & 3), <u64>i);
    }
    expect(idx.count()).toBe(64);
    idx.lookup(hot, hot.length, 300, m);
    expect(m.blocksOf(2)).toBe(6);
    expect(idx.evictions).toBe(<u64>(300 * 8 + 6 - 64));
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

  it("withBudget: capacity fits the byte budget; layout size as documented", () => {
    expect(PrefixIndex.bytesFor(1024)).toBe(HEADER_BYTES + 1024 * 4 + 1024 * ENTRY_BYTES);
    const idx = PrefixIndex.withBudget(1 << 20, 64 * 1024, 0);
    expect(idx.byteSize() <= 64 * 1024).toBe(true);
    expect(idx.capacity()).toBe(1024);
    expect(load<u32>(changetype<usize>(idx.buf))).toBe(0x58505753);
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
