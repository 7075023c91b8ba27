// Prefix placements across proxies (issue 22 item 2; docs/mesh.md "Prefix placements",
// docs/benchmarks/mesh-r9.md, docs/contracts.md "POST /v1/inflight").
//
// Each proxy's prefix index knows only the requests it placed; with K proxies behind a uniform
// split it sees 1/K of every shared prefix and sends the rest of a prefix's requests elsewhere
// (the DES: hit rate 87 % at K = 1, 74 % at K = 4, 59 % at K = 16). The records its VMs already
// exchange among themselves (lib/request/prefix-share.ts: a block whose front slot changed, or one
// re-offered once per maxAgeMs / 4 window) also go into a second ring, the mesh outbox -- only the
// chain checkpoints and a placement's last block (lib/request/prefix.ts CHECKPOINT_EVERY: a chain
// hash covers the blocks before it, ~8x fewer records; round 9b); the mesh
// report carries the outbox's new records (at most the outbox's capacity, min(prefix.entries,
// 4096), per service and report; more new placements between two reports are counted dropped), and the agent's answer carries the other proxies' records. The
// filter applies them with PrefixIndex.learnRemote (never more trusted than its own knowledge).
//
// Trailer of a version-2 in-flight report or answer (after the counts, little-endian):
//   u16 sectionCount, per section: u8 nameLen (1..255), service name UTF-8, u16 addrCount,
//   addrCount × (u8 len (1..255), address UTF-8), u16 recordCount,
//   recordCount × (u64 blockHash, u16 addrIndex).
// A record with hash 0, an address index outside the table, an address this proxy does not route
// to, or a service it does not know is ignored and counted; a framing error refuses the document.
import { ShareRing } from "./request/prefix-share";
import { PrefixIndex } from "./request/prefix";
import { Inflight } from "./inflight";

export const MESH_VERSION_PREFIX: u8 = 2;
export const PREFIX_RECORD_BYTES: i32 = 10;

/** Per service: the outbox ring and how far the reports have taken it. */
export class MeshOutbox {
  ring: ShareRing;
  /** sequence number of the next record not reported */
  sent: u64 = 0;
  /** records overwritten in the ring before a report took them */
  dropped: u64 = 0;
  constructor(entries: i32) { this.ring = new ShareRing(entries); }

  /** Records to report now: [from, from + n), at most `max`; what the ring overwrote is counted dropped. */
  take(max: i32): u64 {
    const r = this.ring;
    const cap = <u64>r.capacity();
    if (r.end - this.sent > cap) { this.dropped += r.end - this.sent - cap; this.sent = r.end - cap; }
    return min(r.end - this.sent, <u64>(max > 0 ? max : 0));
  }
}

/**
 * The trailer for `outs[i]` of service `names[i]` (null: not request-aware, no section), each
 * section at most `maxRecords[i]` records, the oldest first (a placement's leading blocks before its
 * later ones: the index matches from block 0). Advances each outbox's `sent`. Slots whose address
 * this proxy no longer holds are left out.
 */
export function encodePrefixTrailer(names: Array<string>, outs: Array<MeshOutbox | null>, maxRecords: Array<i32>, inflight: Inflight): ArrayBuffer {
  const addrs = inflight.addresses();
  const parts = new Array<ArrayBuffer>();
  let size = 2;
  for (let i = 0; i < names.length; i++) {
    const o = outs[i];
    if (o == null) continue;
    const nameLen = String.UTF8.byteLength(names[i]);
    if (nameLen == 0 || nameLen > 255) continue;
    const n = <i32>o.take(maxRecords[i]);
    const r = o.ring;
    // slot -> index in the section's address table (-1: not in it yet)
    const tableOf = new StaticArray<i32>(addrs.length);
    for (let s = 0; s < addrs.length; s++) unchecked(tableOf[s] = -1);
    const table = new Array<string>();
    let addrBytes = 0;
    let kept = 0;
    for (let k = 0; k < n; k++) {
      const s = <i32>unchecked(r.slots[<i32>((o.sent + <u64>k) & r.mask)]);
      if (s >= addrs.length) continue;
      const len = String.UTF8.byteLength(unchecked(addrs[s]));
      if (len == 0 || len > 255) continue;
      kept++;
      if (unchecked(tableOf[s]) >= 0) continue;
      if (table.length >= 65535) { kept--; continue; }
      unchecked(tableOf[s] = table.length);
      table.push(unchecked(addrs[s]));
      addrBytes += 1 + len;
    }
    const sec = new ArrayBuffer(1 + nameLen + 2 + addrBytes + 2 + min(kept, 65535) * PREFIX_RECORD_BYTES);
    const p = changetype<usize>(sec);
    store<u8>(p, <u8>nameLen);
    String.UTF8.encodeUnsafe(changetype<usize>(names[i]), names[i].length, p + 1);
    let off = p + 1 + <usize>nameLen;
    store<u16>(off, <u16>table.length);
    off += 2;
    for (let t = 0; t < table.length; t++) {
      const a = unchecked(table[t]);
      const len = <usize>String.UTF8.encodeUnsafe(changetype<usize>(a), a.length, off + 1);
      store<u8>(off, <u8>len);
      off += 1 + len;
    }
    const countAt = off;
    off += 2;
    let written = 0;
    for (let k = 0; k < n && written < 65535; k++) {
      const j = <i32>((o.sent + <u64>k) & r.mask);
      const s = <i32>unchecked(r.slots[j]);
      if (s >= addrs.length) continue;
      const t = unchecked(tableOf[s]);
      if (t < 0) continue;
      store<u64>(off, unchecked(r.hashes[j]));
      store<u16>(off, <u16>t, 8);
      off += <usize>PREFIX_RECORD_BYTES;
      written++;
    }
    store<u16>(countAt, <u16>written);
    o.sent += <u64>n;
    parts.push(sec.slice(0, <i32>(off - p)));
    size += <i32>(off - p);
  }
  const out = new ArrayBuffer(size);
  const q = changetype<usize>(out);
  store<u16>(q, <u16>parts.length);
  let at: usize = 2;
  for (let i = 0; i < parts.length; i++) {
    memory.copy(q + at, changetype<usize>(parts[i]), <usize>parts[i].byteLength);
    at += <usize>parts[i].byteLength;
  }
  return out;
}

/** A checked trailer: where it ends and how many records it holds (or why it was refused). */
export class PrefixTrailer {
  ok: bool = false;
  error: string = "";
  end: i32 = 0;
  records: i32 = 0;
}

/** Checks the framing of a trailer starting at `off` of `doc` (every length inside the document). */
export function checkPrefixTrailer(doc: ArrayBuffer, off: i32): PrefixTrailer {
  const t = new PrefixTrailer();
  const p = changetype<usize>(doc);
  const n = doc.byteLength;
  if (off + 2 > n) { t.error = "prefix trailer is cut off"; return t; }
  const sections = <i32>load<u16>(p + <usize>off);
  off += 2;
  for (let s = 0; s < sections; s++) {
    if (off + 1 > n) { t.error = "prefix section " + s.toString() + " is cut off"; return t; }
    const nameLen = <i32>load<u8>(p + <usize>off);
    if (nameLen == 0) { t.error = "prefix section " + s.toString() + " has an empty service name"; return t; }
    off += 1 + nameLen;
    if (off + 2 > n) { t.error = "prefix section " + s.toString() + " is cut off"; return t; }
    const nAddr = <i32>load<u16>(p + <usize>off);
    off += 2;
    for (let a = 0; a < nAddr; a++) {
      if (off + 1 > n) { t.error = "prefix section " + s.toString() + " address " + a.toString() + " is cut off"; return t; }
      const len = <i32>load<u8>(p + <usize>off);
      if (len == 0) { t.error = "prefix section " + s.toString() + " address " + a.toString() + " is empty"; return t; }
      off += 1 + len;
    }
    if (off + 2 > n) { t.error = "prefix section " + s.toString() + " is cut off"; return t; }
    const nRec = <i32>load<u16>(p + <usize>off);
    off += 2;
    if (<i64>off + <i64>nRec * PREFIX_RECORD_BYTES > <i64>n) { t.error = "prefix section " + s.toString() + " records are cut off"; return t; }
    off += nRec * PREFIX_RECORD_BYTES;
    t.records += nRec;
  }
  t.ok = true;
  t.end = off;
  return t;
}

/** What applying a trailer did. */
export class PrefixApplied {
  /** records that changed an index entry */
  learned: i32 = 0;
  /** records already known (the slot listed) */
  known: i32 = 0;
  /** records ignored: hash 0, address index outside the table, address or service not ours */
  ignored: i32 = 0;
}

/**
 * Applies a checked trailer at `off`: each record of service `names[i]` to `indexes[i]` (null: the
 * service is not request-aware here, its records ignored), addresses resolved through `inflight`
 * (never allocating a slot: the document is input).
 */
export function applyPrefixTrailer(doc: ArrayBuffer, off: i32, names: Array<string>, indexes: Array<PrefixIndex | null>, inflight: Inflight, nowMs: u64): PrefixApplied {
  const r = new PrefixApplied();
  const p = changetype<usize>(doc);
  const sections = <i32>load<u16>(p + <usize>off);
  off += 2;
  for (let s = 0; s < sections; s++) {
    const nameLen = <i32>load<u8>(p + <usize>off);
    const name = String.UTF8.decodeUnsafe(p + <usize>off + 1, <usize>nameLen);
    off += 1 + nameLen;
    let index: PrefixIndex | null = null;
    for (let i = 0; i < names.length; i++) if (names[i] == name) { index = indexes[i]; break; }
    const nAddr = <i32>load<u16>(p + <usize>off);
    off += 2;
    const slotOf = new StaticArray<i32>(nAddr);
    for (let a = 0; a < nAddr; a++) {
      const len = <i32>load<u8>(p + <usize>off);
      unchecked(slotOf[a] = index == null ? -1 : inflight.slotOf(String.UTF8.decodeUnsafe(p + <usize>off + 1, <usize>len)));
      off += 1 + len;
    }
    const nRec = <i32>load<u16>(p + <usize>off);
    off += 2;
    for (let k = 0; k < nRec; k++) {
      const rp = p + <usize>off;
      off += PREFIX_RECORD_BYTES;
      const h = load<u64>(rp);
      const ai = <i32>load<u16>(rp, 8);
      const slot = ai < nAddr ? unchecked(slotOf[ai]) : -1;
      if (index == null || h == 0 || slot < 0 || slot >= 0xffff) { r.ignored++; continue; }
      if (index!.learnRemote(h, <u16>slot, nowMs)) r.learned++;
      else r.known++;
    }
  }
  return r;
}
