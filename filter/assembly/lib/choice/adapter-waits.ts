// Critical requests waiting for their LoRA adapter at an instance: while one does and the model's
// pool is overloaded (lib/overload.ts), the other adapters' non-critical requests are held back
// from that instance.
//
// vLLM schedules a waiting request only if its adapter is loaded or a LoRA slot can take it, and
// a slot held by an adapter with running requests cannot; such a request is skipped, whatever its
// priority, while the requests behind it for the loaded adapters run. Under overload the other
// adapters' traffic kept both slots of an instance busy for seconds while a critical request for
// a third adapter waited (bench/llm-routing: 1.0–8.3 s; docs/benchmarks.md, "What is left"). The
// scrape cannot prevent it: the slots turn over faster than it shows. Holding back the other
// adapters' non-critical requests lets their running requests drain, so the waiting adapter gets
// a slot within about one service time. Only under overload: at normal load the held-back requests
// loaded their adapters elsewhere, and the extra loads and evictions doubled the critical adapter
// requests' TTFT P99 on one seed (389 → 710 ms). A critical request waits from its send to its first
// response byte (vLLM streams its first chunk with the first token). Per in-flight slot: the
// critical adapter requests waiting there, per adapter. Per worker VM; grows with
// the in-flight table's slots (the live fleet); a slot freed and reused starts afresh.
import { Inflight } from "../inflight";

/** One slot's waiting critical requests, per adapter (a few: the adapters critical requests ask for). */
class SlotWaits {
  gen: u32 = 0;
  adapters: Array<string> = [];
  counts: Array<i32> = [];
  total: i32 = 0;

  reset(gen: u32): void { this.gen = gen; this.adapters.length = 0; this.counts.length = 0; this.total = 0; }

  indexOf(adapter: string): i32 {
    for (let k = 0; k < this.adapters.length; k++) if (unchecked(this.adapters[k]) == adapter) return k;
    return -1;
  }
}

export class AdapterWaits {
  private slots: Array<SlotWaits> = [];

  constructor(private inflight: Inflight) {}

  /** A critical request for `adapter` was sent with in-flight handle `handle` (Inflight.acquire). */
  begin(handle: i64, adapter: string): void {
    if (handle < 0) return;
    const slot = <i32>(handle & 0xffffffff);
    const g = <u32>(handle >>> 32);
    while (this.slots.length <= slot) this.slots.push(new SlotWaits());
    const w = unchecked(this.slots[slot]);
    if (w.gen != g) w.reset(g);
    const k = w.indexOf(adapter);
    if (k >= 0) unchecked(w.counts[k]++);
    else { w.adapters.push(adapter); w.counts.push(1); }
    w.total++;
  }

  /** That request (for `adapter`) got its first response byte, or ended (once). */
  end(handle: i64, adapter: string): void {
    if (handle < 0) return;
    const slot = <i32>(handle & 0xffffffff);
    if (slot >= this.slots.length) return;
    const w = unchecked(this.slots[slot]);
    if (w.gen != <u32>(handle >>> 32)) return;
    const k = w.indexOf(adapter);
    if (k < 0) return;
    const c = unchecked(w.counts[k]) - 1;
    w.total--;
    if (c > 0) { unchecked(w.counts[k] = c); return; }
    // drop it (order does not matter)
    const last = w.adapters.length - 1;
    unchecked(w.adapters[k] = unchecked(w.adapters[last]));
    unchecked(w.counts[k] = unchecked(w.counts[last]));
    w.adapters.length = last;
    w.counts.length = last;
  }

  /** Critical adapter requests waiting at `slot` (0 once the slot was freed). */
  waitingAt(slot: i32): i32 {
    if (slot < 0 || slot >= this.slots.length) return 0;
    const gens = this.inflight.gen;
    const w = unchecked(this.slots[slot]);
    if (slot >= gens.length || unchecked(gens[slot]) != w.gen) return 0;
    return w.total;
  }

  /** Whether a non-critical request for `adapter` is held back from `slot`: critical requests for other adapters only wait there. */
  holds(slot: i32, adapter: string): bool {
    return this.waitingAt(slot) > 0 && unchecked(this.slots[slot]).indexOf(adapter) < 0;
  }
}
