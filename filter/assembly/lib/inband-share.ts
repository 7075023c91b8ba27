// Sharing the in-band table across worker VMs (docs/inband.md "Across worker VMs").
// Document: u16 count, count × (u8 addrLen, addr, 16 × f64: hdrPeak, hdrRef, hdrAt, eosPeak,
// eosRef, eosAt, err, errAt, lastSentMs, probeUntil, hdrPrev, eosPrev, slowAt, normalRun, normalAt, eosN). Every VM reads it, adopts per signal what
// is newer than its own (by the sample time; the last send and the probe pacing: the later),
// and writes back its merged table of the addresses it plans: bounded by the live fleet.

import { InbandTable } from "./inband";

/** Bytes per entry after the address in the shared document. */
const ENTRY: i32 = 128;

/**
 * Merges the shared document into this table (slots by address via `slotOf`, -1: not planned
 * here) and returns the document to write back. `addrs[s]` is slot s's address ("" = free).
 * Malformed input is ignored from the first bad entry on.
 */
export function mergeShared(t: InbandTable, doc: ArrayBuffer, addrs: Array<string>, slotOf: (a: string) => i32, live: Array<i32> | null = null): ArrayBuffer {
  const p = changetype<usize>(doc);
  const n = doc.byteLength;
  if (n >= 2) {
    const count = <i32>load<u16>(p);
    let off = 2;
    for (let e = 0; e < count; e++) {
      if (off + 1 > n) break;
      const len = <i32>load<u8>(p + <usize>off);
      if (off + 1 + len + ENTRY > n) break;
      const addr = String.UTF8.decodeUnsafe(p + <usize>off + 1, <usize>len);
      const q = p + <usize>(off + 1 + len);
      off += 1 + len + ENTRY;
      const s = slotOf(addr);
      if (s < 0 || s >= t.gen.length) continue;
      const hAt = load<f64>(q + 16), eAt = load<f64>(q + 40), rAt = load<f64>(q + 56);
      if (hAt > t.hdrAt[s]) { t.hdrPeak[s] = load<f64>(q); t.hdrRef[s] = load<f64>(q + 8); t.hdrAt[s] = hAt; t.hdrPrev[s] = load<f64>(q + 80); }
      if (eAt > t.eosAt[s]) { t.normalRun[s] = load<f64>(q + 104); t.normalAt[s] = load<f64>(q + 112); t.eosN[s] = load<f64>(q + 120); }
      if (eAt > t.eosAt[s]) { t.eosPeak[s] = load<f64>(q + 24); t.eosRef[s] = load<f64>(q + 32); t.eosAt[s] = eAt; t.eosPrev[s] = load<f64>(q + 88); }
      if (rAt > t.errAt[s]) { t.err[s] = load<f64>(q + 48); t.errAt[s] = rAt; }
      const sa = load<f64>(q + 96);
      if (sa > t.slowAt[s]) t.slowAt[s] = sa;
      const ls = load<f64>(q + 64), pu = load<f64>(q + 72);
      if (ls > t.lastSentMs[s]) t.lastSentMs[s] = ls;
      // probe pacing: the later wait wins, unless a normal answer came to a request sent at or
      // after the sends it paces (the VM that saw the answer ended the backoff: judge())
      if (pu > t.probeUntil[s] && ls > t.normalAt[s]) t.probeUntil[s] = pu;
      if (t.normalAt[s] >= t.lastSentMs[s] && t.normalAt[s] > 0) { t.probeUntil[s] = -Infinity; t.probeStreak[s] = 0; }
    }
  }
  let count = 0;
  let size = 2;
  const limit = addrs.length < t.gen.length ? addrs.length : t.gen.length;
  // the slots to write: the live ones when given (issue 24 #2), else all below limit
  const nw = live != null ? live.length : limit;
  for (let k = 0; k < nw; k++) {
    const s = live != null ? unchecked(live[k]) : k;
    if (s >= limit || addrs[s].length == 0 || (t.hdrAt[s] == 0 && t.eosAt[s] == 0 && t.errAt[s] == 0)) continue;
    size += 1 + String.UTF8.byteLength(addrs[s]) + ENTRY;
    count++;
    if (count == 0xffff) break;
  }
  const out = new ArrayBuffer(size);
  const o = changetype<usize>(out);
  store<u16>(o, <u16>count);
  let off: usize = 2;
  let written = 0;
  for (let k = 0; k < nw && written < count; k++) {
    const s = live != null ? unchecked(live[k]) : k;
    if (s >= limit || addrs[s].length == 0 || (t.hdrAt[s] == 0 && t.eosAt[s] == 0 && t.errAt[s] == 0)) continue;
    const a = addrs[s];
    const len = <usize>String.UTF8.encodeUnsafe(changetype<usize>(a), a.length, o + off + 1);
    store<u8>(o + off, <u8>len);
    const q = o + off + 1 + len;
    store<f64>(q, t.hdrPeak[s]); store<f64>(q + 8, t.hdrRef[s]); store<f64>(q + 16, t.hdrAt[s]);
    store<f64>(q + 24, t.eosPeak[s]); store<f64>(q + 32, t.eosRef[s]); store<f64>(q + 40, t.eosAt[s]);
    store<f64>(q + 48, t.err[s]); store<f64>(q + 56, t.errAt[s]);
    store<f64>(q + 64, t.lastSentMs[s]); store<f64>(q + 72, t.probeUntil[s]);
    store<f64>(q + 80, t.hdrPrev[s]); store<f64>(q + 88, t.eosPrev[s]);
    store<f64>(q + 96, t.slowAt[s]); store<f64>(q + 104, t.normalRun[s]); store<f64>(q + 112, t.normalAt[s]); store<f64>(q + 120, t.eosN[s]);
    off += 1 + len + ENTRY;
    written++;
  }
  return out;
}
