// The adapter marks (adapter-sends.ts) shared across worker VMs. Each VM marks the adapters it
// sent where they must be loaded, until a scrape shows them; with several Envoy workers each VM
// saw only its own marks, so two VMs sent two different adapters to the one free LoRA slot and the
// second waited for a drain (bench/llm-routing, 2 workers: critical TTFT P99 1.3 s at normal load,
// adapter requests waiting up to 3.4 s). Exchanged on the tick in the address-keyed sections of
// lib/shared-doc.ts under `switchyard.adapters.v1.<service>`: per live mark the instance address
// and a 32-bit hash of the adapter name (FNV-1a; the names are the snapshot's, the same in every
// VM). A VM drops its own marks when a scrape after the send is in force, and publishes what it
// still holds, so the other VMs' marks need no clock of their own. A remote mark counts like an own
// one (being loaded there, one LoRA slot taken) and once: a mark already present is not repeated.
// Bounded: at most REMOTE_CAPACITY remote marks are read per exchange.
import { AdapterSends, ADAPTER_SENDS_CAPACITY, mark } from "./adapter-sends";
import { LlmPlan, modelHash } from "./plan-llm";
import { AddrSections, AddrSectionWriter, concatSections } from "../shared-doc";
import { Inflight } from "../inflight";

export const REMOTE_CAPACITY: i32 = 1024;

export class AdapterShare {
  /** The other VMs' marks as of the last exchange: in-flight slot and adapter-name hash. */
  remoteSlot: StaticArray<i32> = new StaticArray<i32>(REMOTE_CAPACITY);
  remoteHash: StaticArray<u32> = new StaticArray<u32>(REMOTE_CAPACITY);
  remoteCount: i32 = 0;
  /** Remote records beyond REMOTE_CAPACITY, or naming an address this VM has no slot for, skipped. */
  skipped: u64 = 0;
  /** Scratch for this VM's section (encodeOwn). */
  private writer: AddrSectionWriter = new AddrSectionWriter();

  /** This VM's section: its live marks (address, adapter-name hash). */
  encodeOwn(own: AdapterSends, token: u32, nowMs: u64, addrs: Array<string>): ArrayBuffer {
    const w = this.writer;
    w.begin();
    for (let k = 0; k < ADAPTER_SENDS_CAPACITY; k++) {
      const s = own.slotAt(k);
      if (s >= 0 && s < addrs.length && unchecked(addrs[s]).length > 0) w.add(unchecked(addrs[s]), modelHash(own.modelAt(k)));
    }
    return w.finish(token, nowMs);
  }

  /**
   * Reads the shared document: the other live VMs' marks into remoteSlot/remoteHash, and returns
   * the document to write back (expired sections dropped, ours replaced). A malformed section ends
   * the read there.
   */
  merge(doc: ArrayBuffer, own: AdapterSends, token: u32, nowMs: u64, maxAgeMs: u64, inflight: Inflight): ArrayBuffer {
    this.remoteCount = 0;
    const r = new AddrSections(doc, token, nowMs, maxAgeMs);
    while (r.next()) {
      // never allocate a slot here: the document is input
      const slot = inflight.slotOf(r.addr());
      if (slot < 0 || this.remoteCount >= REMOTE_CAPACITY) { this.skipped++; continue; }
      unchecked(this.remoteSlot[this.remoteCount] = slot);
      unchecked(this.remoteHash[this.remoteCount] = load<u32>(r.valuePtr));
      this.remoteCount++;
    }
    r.keep.push(this.encodeOwn(own, token, nowMs, inflight.addresses()));
    return concatSections(r.keep);
  }

  /** Applies the remote marks to `lp` (candidates' in-flight slots in `slots`, plan order); returns how many took a LoRA slot. */
  apply(lp: LlmPlan, slots: StaticArray<i32>): i32 {
    if (this.remoteCount == 0) return 0;
    // slot -> candidate and column -> name hash, once per call (each tick): not per remote record
    const n = min(lp.n, slots.length);
    let top = -1;
    for (let j = 0; j < n; j++) if (unchecked(slots[j]) > top) top = unchecked(slots[j]);
    const candOf = new StaticArray<i32>(top + 1);
    for (let s = 0; s <= top; s++) unchecked(candOf[s] = -1);
    for (let j = n - 1; j >= 0; j--) if (unchecked(slots[j]) >= 0) unchecked(candOf[unchecked(slots[j])] = j);
    const cols = lp.names.length;
    const colHash = lp.hashes;
    let applied = 0;
    for (let k = 0; k < this.remoteCount; k++) {
      const s = unchecked(this.remoteSlot[k]);
      const i = s >= 0 && s <= top ? unchecked(candOf[s]) : -1;
      if (i < 0) continue;
      const h = unchecked(this.remoteHash[k]);
      for (let c = 0; c < cols; c++) {
        if (unchecked(colHash[c]) != h) continue;
        if (mark(lp, c, i)) applied++;
        break;
      }
    }
    return applied;
  }
}
