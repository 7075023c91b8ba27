// The prefix index shared across worker VMs (docs/architecture-choice.md, "Prefix index").
//
// Each VM keeps its own index (lib/request/prefix.ts) and routes from it without a host call.
// What it records that the others do not know yet (a block whose front slot changed, or one last
// recorded or learnt in an earlier maxAgeMs / 4 window) goes into a bounded ring; on the tick every VM reads one shared-data
// document per service, applies the records of the other VMs it has not seen (by sequence number)
// and writes the document back (CAS) with its own section replaced. A VM's section holds what it
// recorded since its publication before last (two tick periods: a reader whose tick drifts against
// the writer's still sees every record once), at most the ring's capacity.
//
// Records name the instance by address, not by slot (each VM numbers its slots itself); an address
// the reader does not route to yet is skipped. Sections of VMs that stopped publishing expire.
//
// Section (little-endian): u32 vmToken, u64 publishedAtMs, u64 firstSeq, u16 addrCount,
// u32 recordCount, addrCount × (u8 len, address bytes), recordCount × (u64 blockHash, u16 addr
// index; 0xffff = none). Record k of a section has sequence number firstSeq + k.
import { Inflight } from "../inflight";
import { PrefixIndex, isCheckpoint } from "./prefix";
import { concatSections } from "../shared-doc";

export const SECTION_HEADER_BYTES: i32 = 26;
export const RECORD_BYTES: i32 = 10;
/** Ring capacity cap: blocks a VM can offer per two ticks (also bounded by prefix.entries). */
export const MAX_RING: i32 = 4096;
/**
 * Records in the whole document: with many workers each section gets an equal share (at least
 * MIN_SECTION_RECORDS, the newest kept), so what every VM copies per tick stays ≈ 160 KiB
 * whatever Envoy's --concurrency.
 */
export const MAX_DOC_RECORDS: i32 = 16384;
export const MIN_SECTION_RECORDS: i32 = 256;
const NO_ADDR: u16 = 0xffff;

/** Bounded ring of (block hash, local slot) records with a running sequence number. */
export class ShareRing {
  hashes: StaticArray<u64>;
  slots: StaticArray<u16>;
  mask: u64;
  /** records ever pushed = sequence number of the next one */
  end: u64 = 0;
  /** `end` at the last two publications (older first) */
  older: u64 = 0;
  newer: u64 = 0;
  /** records overwritten before they were ever published */
  dropped: u64 = 0;

  /** Capacity: the largest power of two ≤ min(entries, MAX_RING), at least 1. */
  constructor(entries: i32) {
    let cap = 1;
    const limit = min(max(entries, 1), MAX_RING);
    while (cap * 2 <= limit) cap *= 2;
    this.hashes = new StaticArray<u64>(cap);
    this.slots = new StaticArray<u16>(cap);
    this.mask = <u64>(cap - 1);
  }

  capacity(): i32 { return this.hashes.length; }

  @inline push(h: u64, slot: u16): void {
    const i = <i32>(this.end & this.mask);
    unchecked(this.hashes[i] = h);
    unchecked(this.slots[i] = slot);
    this.end++;
  }

  /** First sequence number the next section carries. */
  from(): u64 {
    const cap = <u64>this.hashes.length;
    return this.end - this.older > cap ? this.end - cap : this.older;
  }

  /** The section was written: records before `newer` have now been published twice. */
  published(): void {
    const cap = <u64>this.hashes.length;
    if (this.end - this.newer > cap) this.dropped += this.end - this.newer - cap;
    this.older = this.newer;
    this.newer = this.end;
  }
}

/** Per service: the ring, and per other VM the next sequence number expected from it. */
export class PrefixShare {
  ring: ShareRing;
  private seenTokens: Array<u32> = [];
  private seenNext: Array<u64> = [];
  /** records applied from other VMs, and records they published that we missed (ring overrun, late tick) */
  learned: u64 = 0;
  missed: u64 = 0;

  constructor(entries: i32) { this.ring = new ShareRing(entries); }

  private nextOf(token: u32): i64 {
    for (let i = 0; i < this.seenTokens.length; i++) if (unchecked(this.seenTokens[i]) == token) return <i64>unchecked(this.seenNext[i]);
    return -1;
  }

  /**
   * Reads the shared document: applies the records of other live VMs not applied yet to `index`
   * (addresses resolved through `inflight`, never allocating a slot), and returns the document
   * to write back: expired sections dropped, ours replaced. Malformed input ends the read there
   * (what follows is dropped from the returned document). Each record applied also goes to `out`
   * (the mesh outbox, lib/mesh-prefix.ts: whichever VM reports to the agent tells the other proxies
   * what every VM of this proxy placed).
   */
  merge(doc: ArrayBuffer, token: u32, nowMs: u64, maxAgeMs: u64, index: PrefixIndex, inflight: Inflight, out: ShareRing | null = null): ArrayBuffer {
    const keep = new Array<ArrayBuffer>();
    const tokens = new Array<u32>();
    const nexts = new Array<u64>();
    const p = changetype<usize>(doc);
    const n = doc.byteLength;
    let off = 0;
    while (off + SECTION_HEADER_BYTES <= n) {
      const start = off;
      const t = load<u32>(p + <usize>off);
      const at = load<u64>(p + <usize>off, 4);
      const first = load<u64>(p + <usize>off, 12);
      const nAddr = <i32>load<u16>(p + <usize>off, 20);
      const nRec = <i32>load<u32>(p + <usize>off, 22);
      off += SECTION_HEADER_BYTES;
      // the address table, bounds-checked before anything is applied
      const addrAt = off;
      let ok = true;
      for (let a = 0; a < nAddr; a++) {
        if (off + 1 > n) { ok = false; break; }
        off += 1 + <i32>load<u8>(p + <usize>off);
      }
      if (!ok || off > n || <i64>nRec * RECORD_BYTES > <i64>(n - off)) break;
      const recAt = off;
      off += nRec * RECORD_BYTES;
      const live = t != token && at + maxAgeMs >= nowMs;
      if (!live) continue;
      keep.push(doc.slice(start, off));
      const end = first + <u64>nRec;
      const expected = this.nextOf(t);
      let skip: u64 = 0;
      if (expected >= 0) {
        const e = <u64>expected;
        if (e > first) skip = min(e - first, <u64>nRec);
        else if (e < first) this.missed += first - e;
      }
      tokens.push(t);
      nexts.push(expected < 0 || end > <u64>expected ? end : <u64>expected);
      if (skip >= <u64>nRec) continue;
      // local slot per address of the section (-1: not one of ours)
      const slotOf = new StaticArray<i32>(nAddr);
      let q = addrAt;
      for (let a = 0; a < nAddr; a++) {
        const len = <i32>load<u8>(p + <usize>q);
        unchecked(slotOf[a] = inflight.slotOf(String.UTF8.decodeUnsafe(p + <usize>q + 1, <usize>len)));
        q += 1 + len;
      }
      for (let k = <i32>skip; k < nRec; k++) {
        const rp = p + <usize>recAt + <usize>k * <usize>RECORD_BYTES;
        const ai = load<u16>(rp, 8);
        if (ai == NO_ADDR || <i32>ai >= nAddr) continue;
        const slot = unchecked(slotOf[ai]);
        if (slot < 0 || slot >= 0xffff) continue;
        index.learn(load<u64>(rp), <u16>slot, nowMs);
        // the mesh gets the checkpoints only (lib/request/prefix.ts CHECKPOINT_EVERY; a record here
        // carries no position, so another VM's last block is not known as one)
        if (out != null && isCheckpoint(load<u64>(rp))) out.push(load<u64>(rp), <u16>slot);
        this.learned++;
      }
    }
    // VMs gone from the document are forgotten: this state is bounded by the live VMs
    this.seenTokens = tokens;
    this.seenNext = nexts;
    keep.push(this.encodeOwn(token, nowMs, inflight, max(MIN_SECTION_RECORDS, MAX_DOC_RECORDS / (keep.length + 1))));
    return concatSections(keep);
  }

  /** Our section: the ring's records since the publication before last (the newest `maxRecords`), slots as addresses. */
  encodeOwn(token: u32, nowMs: u64, inflight: Inflight, maxRecords: i32 = MAX_RING): ArrayBuffer {
    const ring = this.ring;
    let from = ring.from();
    if (ring.end - from > <u64>max(maxRecords, 0)) from = ring.end - <u64>max(maxRecords, 0);
    const nRec = <i32>(ring.end - from);
    const addrs = inflight.addresses();
    // slot → index in the section's address table (-1: not yet in it)
    const tableOf = new StaticArray<i32>(addrs.length);
    for (let i = 0; i < addrs.length; i++) unchecked(tableOf[i] = -1);
    const table = new Array<string>();
    let addrBytes = 0;
    for (let k = 0; k < nRec; k++) {
      const s = <i32>unchecked(ring.slots[<i32>((from + <u64>k) & ring.mask)]);
      if (s >= addrs.length || unchecked(tableOf[s]) >= 0) continue;
      const a = unchecked(addrs[s]);
      const len = String.UTF8.byteLength(a);
      if (len == 0 || len > 255) continue;
      unchecked(tableOf[s] = table.length);
      table.push(a);
      addrBytes += 1 + len;
    }
    const out = new ArrayBuffer(SECTION_HEADER_BYTES + addrBytes + nRec * RECORD_BYTES);
    const p = changetype<usize>(out);
    store<u32>(p, token);
    store<u64>(p, nowMs, 4);
    store<u64>(p, from, 12);
    store<u16>(p, <u16>table.length, 20);
    store<u32>(p, <u32>nRec, 22);
    let off: usize = <usize>SECTION_HEADER_BYTES;
    for (let i = 0; i < table.length; i++) {
      const a = unchecked(table[i]);
      const len = <usize>String.UTF8.encodeUnsafe(changetype<usize>(a), a.length, p + off + 1);
      store<u8>(p + off, <u8>len);
      off += 1 + len;
    }
    for (let k = 0; k < nRec; k++) {
      const i = <i32>((from + <u64>k) & ring.mask);
      const s = <i32>unchecked(ring.slots[i]);
      const t = s < addrs.length ? unchecked(tableOf[s]) : -1;
      store<u64>(p + off, unchecked(ring.hashes[i]));
      store<u16>(p + off, t < 0 ? NO_ADDR : <u16>t, 8);
      off += <usize>RECORD_BYTES;
    }
    return out;
  }
}
