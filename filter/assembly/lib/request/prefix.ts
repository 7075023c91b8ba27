// Prefix-cache locality estimate, data-plane side: hash a prompt in fixed-size blocks with a
// chain hash (block i's hash covers blocks 0..i and the model), remember which instance slots
// each block hash was sent to, and on a new request count, per slot, how many leading blocks of
// its prompt that slot was sent. This is the estimation mode of the Gateway API Inference
// Extension's prefix plugin (its defaults: 64-byte blocks, i.e. vLLM's 16-token block at ~4
// characters per token; at most 256 blocks matched), with bounded, aged memory.
//
// The index is set-associative (docs/architecture-choice.md, "Prefix index"): a block hash picks
// one set of WAYS entries that fills two adjacent 64-byte cache lines, so a lookup touches one
// 128-byte-aligned pair per block whatever the working set, and a full set evicts its least
// recently recorded way. It lives in ONE ArrayBuffer with a fixed layout (u32 offsets, no
// pointers) so the same bytes could be kept in Proxy-Wasm shared data. Layout (little-endian):
//   header (64 B): magic u32 "SWPX", version u32 (2), capacity u32 (sets × WAYS), sets u32 (power
//     of 2), count u32, reserved u32, setsOffset u32 (from the buffer start, 128-byte aligned),
//     reserved u32, maxAgeMs u64 @32, epochMs u64 @40, reserved
//   sets at setsOffset: sets × WAYS entries of 16 B: tag u32 @0 (the hash's high 32 bits, 0 = empty
//     way), at u32 @4 (ms since epochMs of the last record), slots u16[4] @8 (most recent first,
//     0xffff = none)
// The set is the hash's low bits, the tag its high 32: two blocks are confused only when the set
// bits and the tag agree (WAYS in 2^32 per probe; a confusion only misprices one prefix). `at` is
// 32-bit: when now − epochMs nears 2^31 ms the index is re-based (one O(capacity) pass about every
// 12 days: expired entries cleared, the others shifted), so no wrap ever revives an entry.
//
// Sharing across worker VMs (lib/request/prefix-share.ts): record() appends to a bounded ring
// each block whose front slot changed, or that was last recorded in an earlier quarter-of-maxAgeMs
// window (so the other VMs' copies, aged at maxAgeMs, are refreshed at least every maxAgeMs / 2
// while this VM keeps using it); the tick exchanges the rings through one shared-data key and
// learn() applies the other VMs' records.

import { ShareRing } from "./prefix-share";

export const DEFAULT_BLOCK_BYTES: i32 = 64;
export const DEFAULT_MAX_BLOCKS: i32 = 256;
/** instance slots remembered per block hash (most recent first) */
export const SLOTS_PER_ENTRY: i32 = 4;
export const NO_SLOT: u16 = 0xffff;
/** entries per set: two 64-byte cache lines. Fewer ways evict more blocks early, and one evicted
 *  block cuts every longer prefix through it (docs/architecture-choice.md, "Prefix index"). */
export const WAYS: i32 = 8;

/**
 * Mesh checkpoints (docs/mesh.md "Prefix placements", docs/benchmarks/mesh-r9b.md): of the blocks a
 * placement offers, only the checkpoints and the placement's last block go to the other proxies.
 * A block is a checkpoint when 3 bits of its chain hash (bits 24-26: above the set bits of any
 * index below 2^27 entries, below the tag) are all set, so on average every CHECKPOINT_EVERY-th
 * block, decided by its content, not its position: a worker VM forwarding another VM's records
 * (which carry no position) picks the same ones. A chain hash covers every block before it, so a
 * checkpoint at block j sent to a slot says the slot was sent blocks 0..j; the receiver's lookup
 * credits up to its longest such checkpoint. 8: the mesh records fall ~8× (19-37 per request on
 * the Poisson sets) while a remote match is credited on average ~7 blocks (~112 tokens at 16 per
 * block) short of what was sent, against cached prefixes of hundreds of blocks (the index matches
 * up to 256); measured in docs/benchmarks/mesh-r9b.md.
 */
export const CHECKPOINT_EVERY: i32 = 8;
const CHECKPOINT_SHIFT: u64 = 24;
const CHECKPOINT_MASK: u32 = <u32>CHECKPOINT_EVERY - 1;

/** Whether block hash `h` is a mesh checkpoint (CHECKPOINT_EVERY above). */
@inline export function isCheckpoint(h: u64): bool {
  return (<u32>(h >> CHECKPOINT_SHIFT) & CHECKPOINT_MASK) == CHECKPOINT_MASK;
}

const MAGIC: u32 = 0x58505753; // "SWPX"
const VERSION: u32 = 2;
export const HEADER_BYTES: i32 = 64;
export const ENTRY_BYTES: i32 = 16;
const SET_BYTES: i32 = WAYS * ENTRY_BYTES;
const SET_SHIFT: usize = 7;
/** room to align the sets to 128 bytes (the allocator aligns to 16) */
const ALIGN_SLACK: i32 = 112;
/** `at` stays below this many ms after the epoch (re-based past it) */
const REBASE_AT: u64 = 0x80000000;
/** a re-base puts the epoch this far behind now: entries of the last 2^30 ms keep their order */
const REBASE_KEEP: u64 = 0x40000000;

const K1: u64 = 0x9e3779b97f4a7c15;
const K2: u64 = 0xc2b2ae3d27d4eb4f;
const K3: u64 = 0x165667b19e3779f9;

@inline function mix(h: u64, w: u64): u64 {
  h ^= w * K1;
  return rotl<u64>(h, 29) * K2 + K3;
}

/** One lane step: one multiply per 8 bytes (the rotation brings the product's mixed high bits down). */
@inline function lane(a: u64, w: u64): u64 {
  return rotl<u64>((a ^ w) * K1, 31);
}

/** One block's own hash: four independent lanes over 32-byte strides, words past the last stride
 *  into lane a, then finish. It does not depend on the blocks before it (the chain is one mix
 *  after it), so the CPU hashes consecutive blocks side by side; one multiply per word keeps it
 *  within the multiplier's throughput (docs/benchmarks.md, request-aware cost). */
@inline function block(q: usize, len: i32): u64 {
  let a = K1;
  let b = K2;
  let c = K3;
  let d = K1 ^ K2;
  let w = 0;
  for (; w + 32 <= len; w += 32) {
    a = lane(a, load<u64>(q + <usize>w));
    b = lane(b, load<u64>(q + <usize>w, 8));
    c = lane(c, load<u64>(q + <usize>w, 16));
    d = lane(d, load<u64>(q + <usize>w, 24));
  }
  for (; w < len; w += 8) a = lane(a, load<u64>(q + <usize>w));
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
  // chain state: block i's hash is finish(state after block i), state = mix(state, block's own hash)
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
          h = mix(h, block(base + <usize>i, blockBytes));
          unchecked(out[n++] = finish(h));
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
        h = mix(h, block(sp, blockBytes));
        unchecked(out[n++] = finish(h));
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
 * Entries per block the fleet holds. Blocks land in 8-way sets at random (Poisson per set): at one
 * entry per block a set receives Poisson(8) blocks and about 14 % of them find their set full
 * (docs/architecture-choice.md), evicted while the engine still holds them; at two, Poisson(4),
 * about 0.8 %. A property of WAYS, not of a fleet.
 */
export const SET_HEADROOM: i32 = 2;

/**
 * The index's entry budget from what the servers export: the blocks the fleet's KV caches hold, in
 * index blocks (an instance's `kvTokens` ÷ `tokensPerBlock`, tokensPerBlock = prefix.blockBytes ÷
 * bytesPerToken), summed over the live instances, times SET_HEADROOM, bounded by `maxEntries`
 * (memory). An entry stands for one block hash held by 1–4 instances, so the fleet's (block,
 * instance) pairs bound the distinct blocks it can hold; the headroom is what 8-way sets need to
 * keep that many. Much more only keeps prefixes the engines have evicted (docs/benchmarks/llm-r8.md:
 * 262,144 entries on a 48,000-block fleet, 5.5×, sent requests to holders that no longer held);
 * much less forgets what they hold (32,768 on a 212,000-block fleet: conversations left their
 * worker). PrefixIndex rounds down to whole power-of-two sets: between 1 and 2 entries per block.
 * Any instance's capacity unknown (NaN, not above 0), or no instance: `unknownEntries` (the
 * configured prefix.entries), so a fleet that does not export it keeps the configured size.
 */
export function indexEntriesFor(kvTokens: Array<f64>, tokensPerBlock: f64, unknownEntries: i32, maxEntries: i32): i32 {
  const cap = max(WAYS, maxEntries);
  if (kvTokens.length == 0 || !(tokensPerBlock > 0)) return min(max(WAYS, unknownEntries), cap);
  let blocks: f64 = 0;
  for (let i = 0; i < kvTokens.length; i++) {
    const t = unchecked(kvTokens[i]);
    if (!(t > 0) || !isFinite(t)) return min(max(WAYS, unknownEntries), cap);
    blocks += Math.floor(t / tokensPerBlock);
  }
  const want = blocks * <f64>SET_HEADROOM;
  return want >= <f64>cap ? cap : max(WAYS, <i32>want);
}

/**
 * Block hash → instance slots, set-associative: bounded by `capacity` entries (sets × WAYS) and
 * aged: an entry not recorded for `maxAgeMs` counts as absent and is dropped when met.
 */
export class PrefixIndex {
  buf: ArrayBuffer;
  private p: usize;
  private setMask: u32;
  private setsP: usize;
  /** evicted live entries (a full set), and entries dropped because they aged */
  evictions: u64 = 0;
  expirations: u64 = 0;
  /** Where record() puts the blocks to tell the other worker VMs (null: not shared). */
  ring: ShareRing | null = null;
  /** Where record() also puts them for the other proxies (mesh report, lib/mesh-prefix.ts; null: not shared). */
  meshRing: ShareRing | null = null;
  /** Entries lookup() found for the leading blocks of `hitArr` (record() reuses them: no second probe). */
  private hit: StaticArray<u32> = new StaticArray<u32>(0);
  private hitN: i32 = 0;
  private hitArr: usize = 0;
  private hitH0: u64 = 0;
  /** Whether learnRemote() ever applied a record: only then does lookup() look for a checkpoint
   *  past its own walk (one proxy alone looks up exactly as before the mesh). */
  private remote: bool = false;

  /** capacity from a byte budget (whole index, header included); at least one set */
  static withBudget(maxEntries: i32, maxBytes: i32, maxAgeMs: u64): PrefixIndex {
    let cap = max(WAYS, maxEntries);
    while (cap > WAYS && PrefixIndex.bytesFor(cap) > maxBytes) cap >>= 1;
    return new PrefixIndex(cap, maxAgeMs);
  }

  /** Sets for at most `capacity` entries: the largest power of two whose sets fit, at least one. */
  static setsFor(capacity: i32): u32 {
    let s: u32 = 1;
    while (<i64>(s << 1) * WAYS <= <i64>capacity) s <<= 1;
    return s;
  }

  static bytesFor(capacity: i32): i32 {
    return HEADER_BYTES + ALIGN_SLACK + <i32>PrefixIndex.setsFor(capacity) * SET_BYTES;
  }

  constructor(capacity: i32, maxAgeMs: u64) {
    const sets = PrefixIndex.setsFor(capacity);
    this.buf = new ArrayBuffer(PrefixIndex.bytesFor(capacity)); // zeroed: every way empty
    const p = changetype<usize>(this.buf);
    this.p = p;
    this.setMask = sets - 1;
    this.setsP = (p + <usize>HEADER_BYTES + 127) & ~(<usize>127);
    store<u32>(p, MAGIC);
    store<u32>(p, VERSION, 4);
    store<u32>(p, sets * <u32>WAYS, 8);
    store<u32>(p, sets, 12);
    store<u32>(p, 0, 16); // count
    store<u32>(p, <u32>(this.setsP - p), 24);
    store<u64>(p, maxAgeMs, 32);
    store<u64>(p, 0, 40); // epoch: set by the first use (rel)
  }

  /**
   * Re-sized to the sets for `capacity` entries (setsFor: a power of two, at most `capacity`),
   * keeping what it remembers: O(old + new capacity) and one new buffer, run on snapshot adoption,
   * never on the request path. False when the set count is unchanged (nothing done).
   * Growing: an entry does not store the hash bits that now pick among the sets its old set splits
   * into, so it is copied into each of them; it is found in the one its hash picks, and the copies
   * elsewhere are never probed for it, age out at maxAgeMs or are evicted by that set's newer
   * records. Shrinking: each new set keeps the WAYS most recently recorded entries of the old sets
   * folded into it (equal tags: the newer), as if those sets had evicted their least recent.
   */
  resize(capacity: i32): bool {
    const sets = PrefixIndex.setsFor(capacity);
    const oldSets = this.setMask + 1;
    if (sets == oldSets) return false;
    const buf = new ArrayBuffer(PrefixIndex.bytesFor(capacity)); // zeroed: every way empty
    const p = changetype<usize>(buf);
    const setsP = (p + <usize>HEADER_BYTES + 127) & ~(<usize>127);
    memory.copy(p, this.p, <usize>HEADER_BYTES); // magic, version, maxAgeMs, epoch
    store<u32>(p, sets * <u32>WAYS, 8);
    store<u32>(p, sets, 12);
    store<u32>(p, <u32>(setsP - p), 24);
    const from = this.setsP;
    let count: u32 = 0;
    if (sets > oldSets) {
      const m = <usize>(oldSets - 1);
      for (let t: usize = 0; t < <usize>sets; t++) memory.copy(setsP + (t << SET_SHIFT), from + ((t & m) << SET_SHIFT), <usize>SET_BYTES);
    } else {
      const m = <usize>(sets - 1);
      for (let o: usize = 0; o < <usize>oldSets; o++) {
        const sp = setsP + ((o & m) << SET_SHIFT);
        for (let k = 0; k < WAYS; k++) {
          const ep = from + (o << SET_SHIFT) + (<usize>k << 4);
          const tag = load<u32>(ep);
          if (tag == 0) continue;
          const at = load<u32>(ep, 4);
          // the way to take: the same tag (keep the newer), else an empty way, else the least recent if older
          let dst: usize = 0;
          let oldest: u32 = u32.MAX_VALUE;
          let oldestP: usize = 0;
          for (let j = 0; j < WAYS; j++) {
            const dp = sp + (<usize>j << 4);
            const dt = load<u32>(dp);
            if (dt == tag) { dst = load<u32>(dp, 4) < at ? dp : 1; break; }
            if (dt == 0) { if (dst == 0) dst = dp; continue; }
            const da = load<u32>(dp, 4);
            if (da < oldest) { oldest = da; oldestP = dp; }
          }
          if (dst == 1) continue; // a newer copy of the same block is kept
          if (dst == 0 && oldestP != 0 && oldest < at) dst = oldestP;
          if (dst != 0) memory.copy(dst, ep, <usize>ENTRY_BYTES);
        }
      }
    }
    const n = <usize>(sets * <u32>WAYS);
    for (let i: usize = 0; i < n; i++) if (load<u32>(setsP + (i << 4)) != 0) count++;
    store<u32>(p, count, 16);
    this.buf = buf;
    this.p = p;
    this.setsP = setsP;
    this.setMask = sets - 1;
    this.hitN = 0;
    return true;
  }

  count(): i32 { return <i32>load<u32>(this.p, 16); }
  capacity(): i32 { return <i32>load<u32>(this.p, 8); }
  byteSize(): i32 { return this.buf.byteLength; }

  @inline private static tagOf(h: u64): u32 {
    const t = <u32>(h >> 32);
    return t == 0 ? 1 : t; // 0 marks an empty way
  }

  /** Address of `h`'s entry in its set, 0 if absent (the 8 ways of a 128-byte set, unrolled). */
  @inline private find(h: u64): usize {
    return PrefixIndex.probe(this.setsP, this.setMask, h);
  }

  /** Branch-free: which way holds the tag is unpredictable, and a mispredicted branch per block cost more than eight selects. */
  @inline private static probe(setsP: usize, mask: u32, h: u64): usize {
    const sp = setsP + (<usize>(<u32>h & mask) << SET_SHIFT);
    const t = PrefixIndex.tagOf(h);
    let r: usize = select<usize>(sp + 112, 0, load<u32>(sp, 112) == t);
    r = select<usize>(sp + 96, r, load<u32>(sp, 96) == t);
    r = select<usize>(sp + 80, r, load<u32>(sp, 80) == t);
    r = select<usize>(sp + 64, r, load<u32>(sp, 64) == t);
    r = select<usize>(sp + 48, r, load<u32>(sp, 48) == t);
    r = select<usize>(sp + 32, r, load<u32>(sp, 32) == t);
    r = select<usize>(sp + 16, r, load<u32>(sp, 16) == t);
    return select<usize>(sp, r, load<u32>(sp) == t);
  }

  /** `nowMs` as ms since the epoch (< 2^31: re-bases when it would not be). */
  private rel(nowMs: u64): u32 {
    const epoch = load<u64>(this.p, 40);
    if (nowMs < epoch) return 0; // the clock stepped back: as old as the epoch
    if (nowMs - epoch >= REBASE_AT) { this.rebase(nowMs); return <u32>REBASE_KEEP; }
    return <u32>(nowMs - epoch);
  }

  /** New epoch REBASE_KEEP ms before now: aged entries cleared, the others' `at` shifted (older than the epoch: at 0). */
  private rebase(nowMs: u64): void {
    this.hitN = 0;
    const p = this.p;
    const epoch = load<u64>(p, 40);
    const maxAge = load<u64>(p, 32);
    const next = nowMs - REBASE_KEEP;
    const n = <usize>this.capacity();
    let count: u32 = 0;
    for (let i: usize = 0; i < n; i++) {
      const ep = this.setsP + (i << 4);
      if (load<u32>(ep) == 0) continue;
      const at = epoch + <u64>load<u32>(ep, 4);
      if (maxAge > 0 && nowMs > at + maxAge) { store<u32>(ep, 0); this.expirations++; continue; }
      store<u32>(ep, at > next ? <u32>(at - next) : 0, 4);
      count++;
    }
    store<u32>(p, count, 16);
    store<u64>(p, next, 40);
  }

  @inline private expired(ep: usize, rn: u32): bool {
    return load<u32>(ep, 4) < this.liveFrom(rn);
  }

  /** Entries recorded before this (ms since the epoch) have aged at `rn`; 0 when nothing ages. */
  @inline private liveFrom(rn: u32): u32 {
    const maxAge = load<u64>(this.p, 32);
    return maxAge > 0 && <u64>rn > maxAge ? rn - <u32>maxAge : 0;
  }

  /** Entry ep dropped (aged). */
  private drop(ep: usize): void {
    this.hitN = 0;
    store<u32>(ep, 0);
    store<u32>(this.p, load<u32>(this.p, 16) - 1, 16);
    this.expirations++;
  }

  /**
   * A way of h's set for `h`, slots empty: an empty way, else the least recently recorded one
   * (evicted; counted as an expiration when it had aged anyway).
   */
  private insert(h: u64, rn: u32): usize {
    this.hitN = 0;
    const sp = this.setsP + (<usize>(<u32>h & this.setMask) << SET_SHIFT);
    let victim: usize = 0;
    let oldest: u32 = u32.MAX_VALUE;
    for (let k = 0; k < WAYS; k++) {
      const ep = sp + (<usize>k << 4);
      if (load<u32>(ep) == 0) { victim = ep; break; }
      const at = load<u32>(ep, 4);
      if (at < oldest) { oldest = at; victim = ep; }
    }
    if (load<u32>(victim) == 0) store<u32>(this.p, load<u32>(this.p, 16) + 1, 16);
    else if (this.expired(victim, rn)) this.expirations++;
    else this.evictions++;
    store<u32>(victim, PrefixIndex.tagOf(h));
    store<u64>(victim, 0xffffffffffffffff, 8); // 4 empty slots
    return victim;
  }

  /** `slot` to the front of entry ep's list (dropping the oldest when full); false if it already was. */
  @inline private toFront(ep: usize, slot: u16): bool {
    if (load<u16>(ep, 8) == slot) return false;
    let k = 1;
    while (k < SLOTS_PER_ENTRY - 1 && load<u16>(ep + 8 + (<usize>k << 1)) != slot) k++;
    for (; k > 0; k--) store<u16>(ep + 8 + (<usize>k << 1), load<u16>(ep + 8 + (<usize>(k - 1) << 1)));
    store<u16>(ep, slot, 8);
    return true;
  }

  /**
   * Remember that the first `n` block hashes were sent to `slot` at `nowMs`. Right after a
   * lookup() of the same array the entries it found are reused; a block already recorded to this
   * slot first is only refreshed (and offered to the other VMs again only in a later window).
   */
  record(hashes: StaticArray<u64>, n: i32, slot: u16, nowMs: u64): void {
    if (slot == NO_SLOT || n <= 0) return;
    const rn = this.rel(nowMs);
    const hits = this.hitArr == changetype<usize>(hashes) && this.hitH0 == unchecked(hashes[0]) ? this.hitN : 0;
    this.hitN = 0;
    const ring = this.ring;
    const maxAge = load<u64>(this.p, 32);
    // an unchanged entry last recorded before the current quarter-of-maxAge window is offered again
    // (never when entries do not age); windows are counted from the epoch, as `at` is
    const w = maxAge >> 2;
    const windowStart: u32 = maxAge == 0 ? 0 : w == 0 ? rn : <u32>(<u64>rn - <u64>rn % w);
    const live = this.liveFrom(rn);
    const setsP = this.setsP;
    const mask = this.setMask;
    const hit = this.hit;
    for (let i = 0; i < n; i++) {
      const h = unchecked(hashes[i]);
      let ep: usize = i < hits ? <usize>unchecked(hit[i]) : PrefixIndex.probe(setsP, mask, h);
      let share: bool;
      if (ep == 0) {
        ep = this.insert(h, rn);
        store<u16>(ep, slot, 8);
        share = true;
      } else {
        if (i >= hits && load<u32>(ep, 4) < live) store<u64>(ep, 0xffffffffffffffff, 8);
        const before = load<u32>(ep, 4);
        share = this.toFront(ep, slot) || before < windowStart;
      }
      store<u32>(ep, rn, 4);
      if (share && ring != null) ring.push(h, slot);
      // the other proxies get the checkpoints and the placement's last block (CHECKPOINT_EVERY)
      if (share && this.meshRing != null && (i == n - 1 || isCheckpoint(h))) this.meshRing!.push(h, slot);
    }
  }

  /** Another worker VM sent block `h` to (our) `slot`: as record(), without offering it back. */
  learn(h: u64, slot: u16, nowMs: u64): void {
    if (slot == NO_SLOT || h == 0) return; // 0 is never a block hash (input from another VM's document)
    this.hitN = 0;
    const rn = this.rel(nowMs);
    let ep = this.find(h);
    if (ep == 0) ep = this.insert(h, rn);
    else if (this.expired(ep, rn)) store<u64>(ep, 0xffffffffffffffff, 8);
    this.toFront(ep, slot);
    store<u32>(ep, rn, 4);
  }

  /**
   * Another PROXY sent block `h` to (our) `slot` (the mesh answer, lib/mesh-prefix.ts): remote
   * knowledge, never more trusted than this proxy's own. A new block is inserted as learn() does;
   * on a block already known the slot goes BEHIND the slots already listed (the first displaced by
   * this proxy's own records, never displacing one of them but the oldest of a full list). The
   * entry's age is refreshed as an own record of a new slot refreshes it: the block was just sent
   * in the mesh, and a full set evicts its least recently recorded way -- without the refresh an
   * entry a remote send made current was evicted first (eviction-heavy, K = 16: TTFT P99 10.2 s,
   * hit 33.7 % against 4.05 s, 40.4 % with it; docs/benchmarks/mesh-r9.md). A slot already listed
   * changes nothing. Never offered back (no ring). Returns whether the entry changed.
   */
  learnRemote(h: u64, slot: u16, nowMs: u64): bool {
    if (slot == NO_SLOT || h == 0) return false;
    this.hitN = 0;
    this.remote = true;
    const rn = this.rel(nowMs);
    let ep = this.find(h);
    if (ep != 0 && this.expired(ep, rn)) {
      store<u64>(ep, 0xffffffffffffffff, 8);
      store<u32>(ep, rn, 4);
    } else if (ep == 0) {
      ep = this.insert(h, rn);
      store<u32>(ep, rn, 4);
    }
    const w = load<u64>(ep, 8);
    if (holds(w, slot)) return false;
    let k = 0;
    while (k < SLOTS_PER_ENTRY - 1 && load<u16>(ep + 8 + (<usize>k << 1)) != NO_SLOT) k++;
    store<u16>(ep + 8 + (<usize>k << 1), slot);
    store<u32>(ep, rn, 4);
    return true;
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
    const rn = this.rel(nowMs);
    // only the (at most 4) slots of block 0 can hold a prefix: track them in locals
    let ep = this.find(unchecked(hashes[0]));
    if (ep != 0 && this.expired(ep, rn)) { this.drop(ep); ep = 0; }
    if (ep == 0) { if (this.remote) this.checkpoint(hashes, n, 0, this.liveFrom(rn), out); return; }
    if (this.hit.length < n) this.hit = new StaticArray<u32>(max(n, hashes.length));
    const hit = this.hit;
    unchecked(hit[0] = <u32>ep);
    let found = 1;
    const first = load<u64>(ep, 8);
    let c0: i32 = 1, c1: i32 = 1, c2: i32 = 1, c3: i32 = 1;
    const s0 = <u16>first, s1 = <u16>(first >> 16), s2 = <u16>(first >> 32), s3 = <u16>(first >> 48);
    const live = this.liveFrom(rn);
    const setsP = this.setsP;
    const mask = this.setMask;
    let i = 1;
    // fast path: blocks whose slot list is block 0's extend every candidate still at i
    for (; i < n; i++) {
      ep = PrefixIndex.probe(setsP, mask, unchecked(hashes[i]));
      if (ep == 0 || load<u64>(ep, 8) != first || load<u32>(ep, 4) < live) break;
      unchecked(hit[found++] = <u32>ep);
    }
    if (i < n && ep != 0) {
      c0 = c1 = c2 = c3 = i;
      for (; i < n; i++) {
        ep = PrefixIndex.probe(setsP, mask, unchecked(hashes[i]));
        if (ep == 0) break;
        if (load<u32>(ep, 4) < live) { this.drop(ep); found = 0; break; }
        unchecked(hit[found++] = <u32>ep);
        const w = load<u64>(ep, 8);
        let ext = false;
        if (c0 == i && holds(w, s0)) { c0++; ext = true; }
        if (c1 == i && holds(w, s1)) { c1++; ext = true; }
        if (c2 == i && holds(w, s2)) { c2++; ext = true; }
        if (c3 == i && holds(w, s3)) { c3++; ext = true; }
        if (!ext) break;
      }
    } else c0 = c1 = c2 = c3 = i;
    // what a record() of the same hashes may reuse (drop() above cleared it: found = 0 then)
    this.hitN = found;
    this.hitArr = changetype<usize>(hashes);
    this.hitH0 = unchecked(hashes[0]);
    if (s0 != NO_SLOT) { out.slots.push(<i32>s0); out.blocks.push(c0); }
    if (s1 != NO_SLOT) { out.slots.push(<i32>s1); out.blocks.push(c1); }
    if (s2 != NO_SLOT) { out.slots.push(<i32>s2); out.blocks.push(c2); }
    if (s3 != NO_SLOT) { out.slots.push(<i32>s3); out.blocks.push(c3); }
    if (i < n && this.remote) this.checkpoint(hashes, n, i, live, out);
  }

  /**
   * The walk from block 0 stopped at block `from` (< n): the longest checkpoint of `hashes` at or
   * after it that the index holds live (another proxy's, lib/mesh-prefix.ts, or this proxy's own
   * past an evicted block), probed from the last block down (the last block and the checkpoints
   * only: about (n − from) / CHECKPOINT_EVERY probes, at most n − from). A chain hash at block j
   * listing a slot means the slot was sent blocks 0..j: each listed slot is credited j + 1 blocks
   * if the walk gave it fewer -- never more than the checkpoint, never less than the walk. Changes
   * no entry (record() may still reuse the walk's).
   */
  private checkpoint(hashes: StaticArray<u64>, n: i32, from: i32, live: u32, out: PrefixMatch): void {
    const setsP = this.setsP;
    const mask = this.setMask;
    for (let j = n - 1; j >= from; j--) {
      const h = unchecked(hashes[j]);
      if (j != n - 1 && !isCheckpoint(h)) continue;
      const ep = PrefixIndex.probe(setsP, mask, h);
      if (ep == 0 || load<u32>(ep, 4) < live) continue;
      for (let k = 0; k < SLOTS_PER_ENTRY; k++) {
        const s = load<u16>(ep + 8 + (<usize>k << 1));
        if (s == NO_SLOT) continue;
        let q = 0;
        while (q < out.slots.length && unchecked(out.slots[q]) != <i32>s) q++;
        if (q == out.slots.length) { out.slots.push(<i32>s); out.blocks.push(j + 1); }
        else if (unchecked(out.blocks[q]) < j + 1) unchecked(out.blocks[q] = j + 1);
      }
      return;
    }
  }

  /** Drop a slot everywhere (its instance left; the slot number may be reused). O(capacity). */
  forgetSlot(slot: u16): void {
    const n = <usize>this.capacity();
    for (let i: usize = 0; i < n; i++) {
      const ep = this.setsP + (i << 4);
      if (load<u32>(ep) == 0) continue;
      let w = 0;
      for (let k = 0; k < SLOTS_PER_ENTRY; k++) {
        const s = load<u16>(ep + 8 + (<usize>k << 1));
        if (s != slot) { store<u16>(ep + 8 + (<usize>w << 1), s); w++; }
      }
      for (; w < SLOTS_PER_ENTRY; w++) store<u16>(ep + 8 + (<usize>w << 1), NO_SLOT);
    }
  }
}
