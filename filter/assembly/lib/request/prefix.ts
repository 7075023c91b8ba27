// Prefix-cache locality estimate, data-plane side: hash a prompt in fixed-size blocks with a
// chain hash (block i's hash covers blocks 0..i and the model), remember which instance slots
// each block hash was sent to, and on a new request count, per slot, how many leading blocks of
// its prompt that slot was sent. This is the estimation mode of the Gateway API Inference
// Extension's prefix plugin (its defaults: 64-byte blocks, i.e. vLLM's 16-token block at ~4
// characters per token; at most 256 blocks matched), with bounded, aged memory.
//
// The index lives in ONE ArrayBuffer with a fixed layout (header, bucket heads, entries; u32
// indices, no pointers), so the same bytes can later be kept in Proxy-Wasm shared data and read
// by every worker VM. Layout (little-endian):
//   header (64 B): magic u32 "SWPX", version u32, capacity u32 (entries), buckets u32 (power of
//     2), count u32, clock hand u32 (next entry index the eviction looks at), reserved u32, freeHead u32,
//     maxAgeMs u64, reserved
//   buckets: u32[buckets], entry index + 1 of the chain head, 0 = empty
//   entries (40 B each): hash u64 @0, atMs u64 @8 (last record), chainNext u32 @16 (index+1),
//     referenced u32 @20 (recorded again since the hand last passed), reserved u32 @24, slots u16[4] @28 (most recent first,
//     0xffff = none), sharedAt u32 @36 (low 32 bits of the ms clock when the entry's front slot
//     was last exchanged with the other worker VMs)
//
// Sharing across worker VMs (lib/request/prefix-share.ts): record() appends to a bounded ring
// each block whose front slot changed (or whose last exchange is older than maxAgeMs / 2, so
// the other VMs' copies do not age out while this VM keeps using it); the tick exchanges the
// rings through one shared-data key and learn() applies the other VMs' records.

import { ShareRing } from "./prefix-share";

export const DEFAULT_BLOCK_BYTES: i32 = 64;
export const DEFAULT_MAX_BLOCKS: i32 = 256;
/** instance slots remembered per block hash (most recent first) */
export const SLOTS_PER_ENTRY: i32 = 4;
export const NO_SLOT: u16 = 0xffff;

const MAGIC: u32 = 0x58505753; // "SWPX"
const VERSION: u32 = 1;
export const HEADER_BYTES: i32 = 64;
export const ENTRY_BYTES: i32 = 40;

const K1: u64 = 0x9e3779b97f4a7c15;
const K2: u64 = 0xc2b2ae3d27d4eb4f;
const K3: u64 = 0x165667b19e3779f9;

@inline function mix(h: u64, w: u64): u64 {
  h ^= w * K1;
  return rotl<u64>(h, 29) * K2 + K3;
}

/** One block into the chain: four independent lanes over 32-byte strides (the multiplies of
 *  one lane wait on each other; four run side by side), words past the last stride into lane a. */
@inline function block(h: u64, q: usize, len: i32): u64 {
  let a = h;
  let b = h ^ K1;
  let c = h ^ K2;
  let d = h ^ K3;
  let w = 0;
  for (; w + 32 <= len; w += 32) {
    a = mix(a, load<u64>(q + <usize>w));
    b = mix(b, load<u64>(q + <usize>w, 8));
    c = mix(c, load<u64>(q + <usize>w, 16));
    d = mix(d, load<u64>(q + <usize>w, 24));
  }
  for (; w < len; w += 8) a = mix(a, load<u64>(q + <usize>w));
  return finish(a ^ rotl<u64>(b, 17) ^ rotl<u64>(c, 31) ^ rotl<u64>(d, 47));
}

@inline function finish(h: u64): u64 {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccd;
  h ^= h >> 33;
  return h == 0 ? 1 : h; // 0 is kept free as "no hash"
}

/** Seed of a chain: the model (and adapter) name, so equal prompts for different models differ. */
export function modelSeed(model: string): u64 {
  let h: u64 = 0x51ed27f1a3b9c5d7;
  for (let i = 0; i < model.length; i++) h = mix(h, <u64>model.charCodeAt(i));
  return finish(h);
}

/** where a block that straddles spans is assembled (reused across calls) */
let scratch = new StaticArray<u8>(DEFAULT_BLOCK_BYTES);

/**
 * Chain hashes of the full `blockBytes`-byte blocks of the byte stream formed by the spans
 * [spans[2k], spans[2k+1]) of `body`, each span followed by one 0x00 byte (a raw JSON string
 * never contains 0x00, so span boundaries cannot be forged by content). A trailing partial block
 * is not hashed. At most `maxBlocks` hashes are written to `out`; returns how many.
 * `blockBytes` must be a positive multiple of 8.
 */
export function hashPromptBlocks(body: ArrayBuffer, spans: Array<i32>, seed: u64, blockBytes: i32, maxBlocks: i32, out: StaticArray<u64>): i32 {
  const limit = min(maxBlocks, out.length);
  if (limit <= 0 || blockBytes <= 0 || (blockBytes & 7) != 0) return 0;
  const base = changetype<usize>(body);
  const bodyLen = body.byteLength;
  if (scratch.length < blockBytes) scratch = new StaticArray<u8>(blockBytes);
  const sp = changetype<usize>(scratch);
  let fill = 0;
  let n = 0;
  let h = seed;
  const nSpans = spans.length >> 1;
  for (let k = 0; k < nSpans && n < limit; k++) {
    let a = unchecked(spans[k << 1]);
    let b = unchecked(spans[(k << 1) + 1]);
    if (a < 0) a = 0;
    if (b > bodyLen) b = bodyLen;
    // the span's bytes, then the separator
    let i = a;
    let sep = false;
    while (n < limit) {
      if (fill == 0) {
        // whole blocks straight from the body, no copy
        while (b - i >= blockBytes && n < limit) {
          h = block(h, base + <usize>i, blockBytes);
          unchecked(out[n++] = h);
          i += blockBytes;
        }
        if (n >= limit) break;
      }
      if (i < b) {
        const take = min(b - i, blockBytes - fill);
        memory.copy(sp + <usize>fill, base + <usize>i, <usize>take);
        fill += take;
        i += take;
      } else {
        store<u8>(sp + <usize>fill, 0);
        fill++;
        sep = true;
      }
      if (fill == blockBytes) {
        h = block(h, sp, blockBytes);
        unchecked(out[n++] = h);
        fill = 0;
      }
      if (sep) break;
    }
  }
  return n;
}

/** Whether the 4 packed u16 slots `w` include `s`. */
@inline function holds(w: u64, s: u16): bool {
  return s != NO_SLOT && (<u16>w == s || <u16>(w >> 16) == s || <u16>(w >> 32) == s || <u16>(w >> 48) == s);
}

export class PrefixMatch {
  /** slots with at least one leading block, and how many */
  slots: Array<i32> = [];
  blocks: Array<i32> = [];

  blocksOf(slot: i32): i32 {
    for (let i = 0; i < this.slots.length; i++) if (unchecked(this.slots[i]) == slot) return unchecked(this.blocks[i]);
    return 0;
  }
}

/**
 * Block hash → instance slots, bounded by `capacity` entries and aged: an entry
 * not recorded for `maxAgeMs` counts as absent and is dropped when met.
 */
export class PrefixIndex {
  buf: ArrayBuffer;
  private p: usize;
  private cap: u32;
  private mask: u32;
  private bucketsP: usize;
  private entriesP: usize;
  evictions: u64 = 0;
  expirations: u64 = 0;
  /** Where record() puts the blocks to tell the other worker VMs (null: not shared). */
  ring: ShareRing | null = null;
  /** Entries lookup() found for the leading blocks of `hitArr` (record() reuses them: no second find). */
  private hit: StaticArray<u32> = new StaticArray<u32>(0);
  private hitN: i32 = 0;
  private hitArr: usize = 0;
  private hitH0: u64 = 0;

  /** capacity from a byte budget (whole index, header included); at least 1 entry */
  static withBudget(maxEntries: i32, maxBytes: i32, maxAgeMs: u64): PrefixIndex {
    let cap = max(1, maxEntries);
    while (cap > 1 && PrefixIndex.bytesFor(cap) > maxBytes) cap >>= 1;
    return new PrefixIndex(cap, maxAgeMs);
  }

  static bucketsFor(capacity: i32): u32 {
    let b: u32 = 1;
    while (b < <u32>capacity) b <<= 1;
    return b;
  }

  static bytesFor(capacity: i32): i32 {
    return HEADER_BYTES + <i32>PrefixIndex.bucketsFor(capacity) * 4 + capacity * ENTRY_BYTES;
  }

  constructor(capacity: i32, maxAgeMs: u64) {
    const cap = <u32>max(1, capacity);
    const buckets = PrefixIndex.bucketsFor(<i32>cap);
    this.buf = new ArrayBuffer(PrefixIndex.bytesFor(<i32>cap));
    this.p = changetype<usize>(this.buf);
    this.cap = cap;
    this.mask = buckets - 1;
    this.bucketsP = this.p + <usize>HEADER_BYTES;
    this.entriesP = this.bucketsP + (<usize>buckets << 2);
    const p = this.p;
    store<u32>(p, MAGIC);
    store<u32>(p, VERSION, 4);
    store<u32>(p, cap, 8);
    store<u32>(p, buckets, 12);
    store<u32>(p, 0, 16); // count
    store<u32>(p, 0, 20); // clock hand
    store<u32>(p, 0, 24);
    // free list through chainNext: 1 -> 2 -> ... -> cap
    store<u32>(p, 1, 28);
    for (let i: u32 = 0; i < cap; i++) store<u32>(this.e(i), i + 1 < cap ? i + 2 : 0, 16);
    store<u64>(p, maxAgeMs, 32);
  }

  @inline private e(i: u32): usize { return this.entriesP + <usize>i * <usize>ENTRY_BYTES; }

  count(): i32 { return <i32>load<u32>(this.p, 16); }
  capacity(): i32 { return <i32>this.cap; }
  byteSize(): i32 { return this.buf.byteLength; }

  @inline private find(h: u64): u32 {
    let x = load<u32>(this.bucketsP + (<usize>(<u32>h & this.mask) << 2));
    while (x != 0) {
      const ep = this.e(x - 1);
      if (load<u64>(ep) == h) return x;
      x = load<u32>(ep, 16);
    }
    return 0;
  }

  /** Remove entry x (unlink from its bucket chain, return it to the free list). */
  private remove(x: u32): void {
    this.hitN = 0;
    const ep = this.e(x - 1);
    const bp = this.bucketsP + (<usize>(<u32>load<u64>(ep) & this.mask) << 2);
    let cur = load<u32>(bp);
    if (cur == x) store<u32>(bp, load<u32>(ep, 16));
    else {
      while (cur != 0) {
        const cp = this.e(cur - 1);
        const nx = load<u32>(cp, 16);
        if (nx == x) { store<u32>(cp, load<u32>(ep, 16), 16); break; }
        cur = nx;
      }
    }
    store<u64>(ep, 0);
    store<u32>(ep, load<u32>(this.p, 28), 16);
    store<u32>(this.p, x, 28);
    store<u32>(this.p, load<u32>(this.p, 16) - 1, 16);
  }

  @inline private expired(x: u32, nowMs: u64): bool {
    const maxAge = load<u64>(this.p, 32);
    return maxAge > 0 && nowMs > load<u64>(this.e(x - 1), 8) + maxAge;
  }

  /**
   * Eviction when full (CLOCK, second chance): the hand walks the entries in index order; one
   * recorded again since the hand last passed is spared once (its mark cleared), the first
   * unmarked one goes. A prompt recorded once goes before one in use, as with LRU, but a hit
   * costs one store instead of relinking a list, and the walk is sequential in memory.
   */
  private evict(): void {
    const p = this.p;
    let hand = load<u32>(p, 20);
    while (true) {
      const ep = this.e(hand);
      const x = hand + 1;
      hand = hand + 1 == this.cap ? 0 : hand + 1;
      if (load<u32>(ep, 20) != 0) { store<u32>(ep, 0, 20); continue; }
      store<u32>(p, hand, 20);
      this.remove(x);
      this.evictions++;
      return;
    }
  }

  /** A free entry for `h` (one evicted when full), linked in, unmarked, slots empty. */
  private insert(h: u64): u32 {
    let x = load<u32>(this.p, 28);
    if (x == 0) {
      this.evict();
      x = load<u32>(this.p, 28);
    }
    const ep = this.e(x - 1);
    store<u32>(this.p, load<u32>(ep, 16), 28); // pop free list
    store<u64>(ep, h);
    const bp = this.bucketsP + (<usize>(<u32>h & this.mask) << 2);
    store<u32>(ep, load<u32>(bp), 16);
    store<u32>(bp, x);
    store<u64>(ep, 0xffffffffffffffff, 28); // 4 empty slots
    store<u32>(ep, 0, 20);
    store<u32>(this.p, load<u32>(this.p, 16) + 1, 16);
    return x;
  }

  /** Entry x recorded again: spared by the next pass of the clock hand. */
  @inline private touch(x: u32): void {
    store<u32>(this.e(x - 1), 1, 20);
  }

  /** `slot` to the front of entry ep's list (dropping the oldest when full); false if it already was. */
  @inline private toFront(ep: usize, slot: u16): bool {
    if (load<u16>(ep, 28) == slot) return false;
    let k = 1;
    while (k < SLOTS_PER_ENTRY - 1 && load<u16>(ep + 28 + (<usize>k << 1)) != slot) k++;
    for (; k > 0; k--) store<u16>(ep + 28 + (<usize>k << 1), load<u16>(ep + 28 + (<usize>(k - 1) << 1)));
    store<u16>(ep, slot, 28);
    return true;
  }

  /**
   * Remember that the first `n` block hashes were sent to `slot` at `nowMs`. Right after a
   * lookup() of the same array the entries it found are reused; a block already recorded to this
   * slot first is only refreshed (and not offered to the other VMs again before maxAgeMs / 2).
   */
  record(hashes: StaticArray<u64>, n: i32, slot: u16, nowMs: u64): void {
    if (slot == NO_SLOT || n <= 0) return;
    const hits = this.hitArr == changetype<usize>(hashes) && this.hitH0 == unchecked(hashes[0]) ? this.hitN : 0;
    this.hitN = 0;
    const ring = this.ring;
    const maxAge = load<u64>(this.p, 32);
    const now32 = <u32>nowMs;
    // re-offer an unchanged entry once half its age has passed (never when entries do not age)
    const reshare: u32 = maxAge == 0 ? u32.MAX_VALUE : <u32>min<u64>(maxAge >> 1, 0x7fffffff);
    for (let i = 0; i < n; i++) {
      const h = unchecked(hashes[i]);
      let x = i < hits ? unchecked(this.hit[i]) : this.find(h);
      let ep: usize;
      let share: bool;
      if (x == 0) {
        x = this.insert(h);
        ep = this.e(x - 1);
        store<u16>(ep, slot, 28);
        share = true;
      } else {
        ep = this.e(x - 1);
        if (i >= hits && maxAge > 0 && nowMs > load<u64>(ep, 8) + maxAge) store<u64>(ep, 0xffffffffffffffff, 28);
        this.touch(x);
        share = this.toFront(ep, slot) || now32 - load<u32>(ep, 36) > reshare;
      }
      store<u64>(ep, nowMs, 8);
      if (share && ring != null) {
        store<u32>(ep, now32, 36);
        ring.push(h, slot);
      }
    }
  }

  /** Another worker VM sent block `h` to (our) `slot`: as record(), without offering it back. */
  learn(h: u64, slot: u16, nowMs: u64): void {
    if (slot == NO_SLOT || h == 0) return; // 0 is never a block hash (input from another VM's document)
    this.hitN = 0;
    let x = this.find(h);
    if (x == 0) x = this.insert(h);
    else {
      const maxAge = load<u64>(this.p, 32);
      if (maxAge > 0 && nowMs > load<u64>(this.e(x - 1), 8) + maxAge) store<u64>(this.e(x - 1), 0xffffffffffffffff, 28);
      this.touch(x);
    }
    const ep = this.e(x - 1);
    this.toFront(ep, slot);
    store<u64>(ep, nowMs, 8);
    store<u32>(ep, <u32>nowMs, 36);
  }

  /**
   * Per slot, the number of leading blocks of `hashes` it was sent (consecutively from block 0,
   * as a cached prefix must be). Stops at the first block no candidate still holds.
   */
  lookup(hashes: StaticArray<u64>, n: i32, nowMs: u64, out: PrefixMatch): void {
    out.slots.length = 0;
    out.blocks.length = 0;
    this.hitN = 0;
    if (n <= 0) return;
    // only the (at most 4) slots of block 0 can hold a prefix: track them in locals
    let x = this.find(unchecked(hashes[0]));
    if (x == 0) return;
    if (this.expired(x, nowMs)) { this.remove(x); this.expirations++; return; }
    if (this.hit.length < n) this.hit = new StaticArray<u32>(max(n, hashes.length));
    const hit = this.hit;
    unchecked(hit[0] = x);
    let found = 1;
    const first = load<u64>(this.e(x - 1), 28);
    let c0: i32 = 1, c1: i32 = 1, c2: i32 = 1, c3: i32 = 1;
    const s0 = <u16>first, s1 = <u16>(first >> 16), s2 = <u16>(first >> 32), s3 = <u16>(first >> 48);
    for (let i = 1; i < n; i++) {
      x = this.find(unchecked(hashes[i]));
      if (x == 0) break;
      if (this.expired(x, nowMs)) { this.remove(x); this.expirations++; found = 0; break; }
      unchecked(hit[found++] = x);
      const w = load<u64>(this.e(x - 1), 28);
      let ext = false;
      if (c0 == i && holds(w, s0)) { c0++; ext = true; }
      if (c1 == i && holds(w, s1)) { c1++; ext = true; }
      if (c2 == i && holds(w, s2)) { c2++; ext = true; }
      if (c3 == i && holds(w, s3)) { c3++; ext = true; }
      if (!ext) break;
    }
    // what a record() of the same hashes may reuse (remove() above cleared it: found = 0 then)
    this.hitN = found;
    this.hitArr = changetype<usize>(hashes);
    this.hitH0 = unchecked(hashes[0]);
    if (s0 != NO_SLOT) { out.slots.push(<i32>s0); out.blocks.push(c0); }
    if (s1 != NO_SLOT) { out.slots.push(<i32>s1); out.blocks.push(c1); }
    if (s2 != NO_SLOT) { out.slots.push(<i32>s2); out.blocks.push(c2); }
    if (s3 != NO_SLOT) { out.slots.push(<i32>s3); out.blocks.push(c3); }
  }

  /** Drop a slot everywhere (its instance left; the slot number may be reused). O(capacity). */
  forgetSlot(slot: u16): void {
    for (let i: u32 = 0; i < this.cap; i++) {
      const ep = this.e(i);
      if (load<u64>(ep) == 0) continue;
      let w = 0;
      for (let k = 0; k < SLOTS_PER_ENTRY; k++) {
        const s = load<u16>(ep + 28 + (<usize>k << 1));
        if (s != slot) { store<u16>(ep + 28 + (<usize>w << 1), s); w++; }
      }
      for (; w < SLOTS_PER_ENTRY; w++) store<u16>(ep + 28 + (<usize>w << 1), NO_SLOT);
    }
  }
}
