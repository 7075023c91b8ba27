// The adapter streams (adapter-streams.ts) shared across worker VMs. Envoy spreads the streams over
// its workers, so each VM sees only its own: with two workers a VM often saw one of the two
// adapters holding an instance's LoRA slots and could not tell that they were full. Exchanged on
// the tick in the address-keyed sections of lib/shared-doc.ts under
// `switchyard.adapter-streams.v1.<service>`: per adapter streaming from an instance, the instance
// address and the adapter name's hash (plan-llm.ts modelHash). Each VM publishes what streams now,
// so a stream that ended leaves the document with its VM's next section; a VM that stops
// publishing ages out after the exchange's maxAgeMs. Bounded: at most PER_SLOT adapters per slot
// are read; more, or an address this VM has no in-flight slot for, are skipped and counted.
import { AdapterStreams } from "./adapter-streams";
import { AddrSections, AddrSectionWriter, concatSections } from "../shared-doc";
import { Inflight } from "../inflight";

export class AdapterStreamsShare {
  /** Remote records skipped: beyond PER_SLOT adapters for a slot, or naming an address this VM has no slot for. */
  skipped: u64 = 0;
  /** Scratch for this VM's section. */
  private writer: AddrSectionWriter = new AddrSectionWriter();

  /** This VM's section: per in-flight slot with an address, its streaming adapters. */
  encodeOwn(streams: AdapterStreams, token: u32, nowMs: u64, addrs: Array<string>): ArrayBuffer {
    const w = this.writer;
    w.begin();
    const n = min(streams.slots(), addrs.length);
    for (let s = 0; s < n; s++) {
      const c = streams.ownCount(s);
      if (c == 0 || unchecked(addrs[s]).length == 0) continue;
      for (let k = 0; k < c; k++) w.add(unchecked(addrs[s]), streams.ownHash(s, k));
    }
    return w.finish(token, nowMs);
  }

  /**
   * Reads the shared document: the other live VMs' streams replace those `streams` had, and the
   * document to write back is returned (expired sections dropped, ours replaced). A malformed
   * section ends the read there.
   */
  merge(doc: ArrayBuffer, streams: AdapterStreams, token: u32, nowMs: u64, maxAgeMs: u64, inflight: Inflight): ArrayBuffer {
    streams.clearRemote();
    const r = new AddrSections(doc, token, nowMs, maxAgeMs);
    while (r.next()) {
      // never allocate an in-flight slot here: the document is input
      const slot = inflight.slotOf(r.addr());
      if (slot < 0 || !streams.addRemote(slot, load<u32>(r.valuePtr))) this.skipped++;
    }
    r.keep.push(this.encodeOwn(streams, token, nowMs, inflight.addresses()));
    return concatSections(r.keep);
  }
}
