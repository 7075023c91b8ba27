// The prefix index sized by the fleet's KV capacity (prefix.ts indexEntriesFor, PrefixIndex.resize;
// docs/benchmarks/llm-r8b.md): the budget is what the servers export, and a resize keeps what the
// index remembers.
import { indexEntriesFor, PrefixIndex, PrefixMatch, SET_HEADROOM, WAYS } from "../assembly/lib/request/prefix";

function inSet(set: u32, tag: u32): u64 {
  return (<u64>tag << 32) | <u64>set;
}

function one(h: u64): StaticArray<u64> {
  const a = new StaticArray<u64>(1);
  a[0] = h;
  return a;
}

function heldBy(idx: PrefixIndex, h: u64, slot: i32, nowMs: u64): i32 {
  const m = new PrefixMatch();
  idx.lookup(one(h), 1, nowMs, m);
  return m.blocksOf(slot);
}

function fleet(n: i32, tokens: f64): Array<f64> {
  const a = new Array<f64>(n);
  for (let i = 0; i < n; i++) a[i] = tokens;
  return a;
}

/** a chain of n distinct hashes (a prompt of n blocks) */
function chain(n: i32, salt: u64): StaticArray<u64> {
  const a = new StaticArray<u64>(n);
  let x: u64 = salt * 0x9e3779b97f4a7c15 + 1;
  for (let i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; a[i] = x == 0 ? 1 : x; }
  return a;
}

describe("indexEntriesFor", () => {
  it("is twice the fleet's KV capacity in index blocks: 2 × sum of kvTokens / (blockBytes / bytesPerToken)", () => {
    // the benchmark's fleet: 8 workers of 26,500 vLLM blocks of 16 tokens; 64-byte index blocks at 4 bytes per token
    expect(indexEntriesFor(fleet(8, 26500 * 16), 64.0 / 4.0, 32768, 1048576)).toBe(2 * 212000);
    // the eviction-heavy fleet: 6,000 blocks each; the overload benchmark's: 2,048
    expect(indexEntriesFor(fleet(8, 6000 * 16), 16, 32768, 262144)).toBe(2 * 48000);
    expect(indexEntriesFor(fleet(8, 2048 * 16), 16, 32768, 262144)).toBe(2 * 16384);
    expect(SET_HEADROOM).toBe(2);
    // an instance's partial index block does not count
    expect(indexEntriesFor([31.0, 47.0], 16, 32768, 262144)).toBe(WAYS); // 2 × 3 blocks: at least one set
    expect(indexEntriesFor([1600.0, 3200.5], 16, 32768, 262144)).toBe(600);
  });

  it("is bounded by maxEntries (memory)", () => {
    expect(indexEntriesFor(fleet(8, 26500 * 16), 16, 32768, 262144)).toBe(262144);
    expect(indexEntriesFor(fleet(8, 1e9), 16, 32768, 1048576)).toBe(1048576);
  });

  it("any instance's capacity unknown, or no instance: the configured entries (bounded by maxEntries)", () => {
    const f = fleet(8, 26500 * 16);
    f[3] = NaN;
    expect(indexEntriesFor(f, 16, 32768, 262144)).toBe(32768);
    f[3] = 0;
    expect(indexEntriesFor(f, 16, 32768, 262144)).toBe(32768);
    f[3] = -5;
    expect(indexEntriesFor(f, 16, 32768, 262144)).toBe(32768);
    f[3] = Infinity;
    expect(indexEntriesFor(f, 16, 32768, 262144)).toBe(32768);
    expect(indexEntriesFor([], 16, 32768, 262144)).toBe(32768);
    expect(indexEntriesFor(fleet(2, 1600), 0, 32768, 262144)).toBe(32768);
    expect(indexEntriesFor([], 16, 32768, 16384)).toBe(16384);
  });

  it("the index it sizes never holds more than the budget: whole power-of-two sets, rounded down", () => {
    const a = new PrefixIndex(32768, 0);
    a.resize(indexEntriesFor(fleet(8, 26500 * 16), 16, 32768, 262144));
    expect(a.capacity()).toBe(262144);
    a.resize(indexEntriesFor(fleet(8, 6000 * 16), 16, 32768, 262144)); // 96,000
    expect(a.capacity()).toBe(65536);
    a.resize(indexEntriesFor(fleet(8, 2048 * 16), 16, 32768, 262144)); // 32,768
    expect(a.capacity()).toBe(32768);
  });
});

describe("PrefixIndex.resize", () => {
  it("an unchanged set count is a no-op (false)", () => {
    const idx = new PrefixIndex(64, 0);
    const buf = idx.buf;
    expect(idx.resize(64)).toBe(false);
    expect(idx.resize(127)).toBe(false); // still 8 sets
    expect(idx.buf == buf).toBe(true);
    expect(idx.resize(128)).toBe(true);
    expect(idx.capacity()).toBe(128);
    expect(idx.byteSize()).toBe(PrefixIndex.bytesFor(128));
  });

  it("growing keeps every held block, and a working set that overflowed a set then fits", () => {
    const idx = new PrefixIndex(64, 0); // 8 sets
    // 8 blocks of set 0 and 8 that are set 8 once there are 16 sets: one set of 8 ways now
    for (let t: u32 = 1; t <= 8; t++) idx.record(one(inSet(0, t)), 1, 2, <u64>t);
    expect(idx.resize(128)).toBe(true); // 16 sets
    for (let t: u32 = 1; t <= 8; t++) expect(heldBy(idx, inSet(0, t), 2, 20)).toBe(1);
    for (let t: u32 = 1; t <= 8; t++) idx.record(one(inSet(8, 100 + t)), 1, 3, <u64>(10 + t));
    for (let t: u32 = 1; t <= 8; t++) {
      expect(heldBy(idx, inSet(0, t), 2, 30)).toBe(1);
      expect(heldBy(idx, inSet(8, 100 + t), 3, 30)).toBe(1);
    }
    // what set 8's records evicted were the copies of set 0's entries the growth put there
    expect(idx.evictions).toBe(8);
  });

  it("growing keeps a long conversation's prefix whole (every block at its holder)", () => {
    const idx = new PrefixIndex(32768, 0);
    const h = chain(200, 7);
    idx.record(h, 200, 5, 1000);
    idx.resize(131072);
    const m = new PrefixMatch();
    idx.lookup(h, 200, 2000, m);
    expect(m.blocksOf(5)).toBe(200);
    // and back down: the most recent entries of the folded sets stay
    idx.resize(32768);
    idx.lookup(h, 200, 3000, m);
    expect(m.blocksOf(5)).toBe(200);
    expect(idx.count()).toBe(200);
  });

  it("shrinking keeps, per new set, the WAYS most recently recorded of the sets folded into it", () => {
    const idx = new PrefixIndex(128, 0); // 16 sets
    for (let t: u32 = 1; t <= 8; t++) idx.record(one(inSet(0, t)), 1, 1, <u64>t);        // older
    for (let t: u32 = 1; t <= 8; t++) idx.record(one(inSet(8, 100 + t)), 1, 2, <u64>(20 + t)); // newer
    expect(idx.resize(64)).toBe(true); // 8 sets: sets 0 and 8 fold into set 0
    expect(idx.capacity()).toBe(64);
    expect(idx.count()).toBe(8);
    for (let t: u32 = 1; t <= 8; t++) {
      expect(heldBy(idx, inSet(8, 100 + t), 2, 50)).toBe(1);
      expect(heldBy(idx, inSet(0, t), 1, 50)).toBe(0);
    }
  });

  it("keeps the epoch and maxAgeMs: an entry ages as it would have without the resize", () => {
    const idx = new PrefixIndex(64, 1000);
    idx.record(one(inSet(3, 9)), 1, 4, 5000);
    idx.resize(256);
    expect(heldBy(idx, inSet(3, 9), 4, 5900)).toBe(1);
    expect(heldBy(idx, inSet(3, 9), 4, 6100)).toBe(0);
  });
});
