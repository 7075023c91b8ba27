// LoRA adapters this proxy sees streaming from each instance: requests for an adapter that got
// their first response byte and have not ended. Those are running there now, which the scrape (up
// to a second old) cannot tell: an adapter it showed loaded may have drained since, and other
// adapters may hold every LoRA slot. vLLM skips a waiting request whose adapter would need a slot
// beyond max_loras, whatever its priority, until a running adapter drains (bench/llm-routing at 2×
// overload: critical adapter requests sent where their adapter streamed had a TTFT P99 of
// 0.38–0.40 s, the others 1.8–2.7 s, some queued for 1–3.5 s). So, per instance:
//  - the request's adapter streams there: it joins the running batch, no load, no slot needed;
//  - max_loras other adapters stream there: it waits for a drain, whatever the scrape says.
// Both hold with any number of proxies: this proxy's streams are a subset of what runs there. The
// other worker VMs' streams, as of the last exchange (adapter-streams-share.ts), count as well:
// with several Envoy workers each VM sees only its share of the streams.
// Keyed by in-flight slot; a slot given to another address is forgotten (forgetSlot) and the
// streams begun before that end without effect (the ticket's epoch). Bounded: at most PER_SLOT
// adapters per slot (vLLM runs at most max_loras at once; beyond it a stream is not recorded and
// counted in `dropped`), and slots grow with the live fleet (lib/inflight.ts).
import { LlmPlan } from "./plan-llm";

export const PER_SLOT: i32 = 16;
/** Nothing known beyond the scrape. */
export const STREAMS_UNKNOWN: i32 = 0;
/** The adapter streams from the instance: a request for it joins the running batch. */
export const STREAMS_RUNNING: i32 = 1;
/** Other adapters hold every LoRA slot of the instance: a request for this one waits for a drain. */
export const STREAMS_FULL: i32 = 2;
/** A stream that was not recorded. */
export const NO_TICKET: i64 = -1;

export class AdapterStreams {
  private hash: StaticArray<u32> = new StaticArray<u32>(0);
  private count: StaticArray<i32> = new StaticArray<i32>(0);
  /** Per slot: entries in use (packed at the slot's start), and the epoch its tickets carry. */
  private used: StaticArray<i32> = new StaticArray<i32>(0);
  private epoch: StaticArray<u32> = new StaticArray<u32>(0);
  /** The other VMs' streaming adapters per slot, as of the last exchange (replaced whole each time). */
  private remote: StaticArray<u32> = new StaticArray<u32>(0);
  private remoteUsed: StaticArray<i32> = new StaticArray<i32>(0);
  /** Streams not recorded: their instance already had PER_SLOT adapters streaming. */
  dropped: u64 = 0;

  /** Slots tracked (grows with the highest slot a stream began on). */
  @inline slots(): i32 { return this.used.length; }

  private grow(slot: i32): void {
    const n = slot + 1;
    const hash = new StaticArray<u32>(n * PER_SLOT);
    const count = new StaticArray<i32>(n * PER_SLOT);
    const used = new StaticArray<i32>(n);
    const epoch = new StaticArray<u32>(n);
    const remote = new StaticArray<u32>(n * PER_SLOT);
    const remoteUsed = new StaticArray<i32>(n);
    const old = this.used.length;
    memory.copy(changetype<usize>(hash), changetype<usize>(this.hash), <usize>(old * PER_SLOT) << 2);
    memory.copy(changetype<usize>(count), changetype<usize>(this.count), <usize>(old * PER_SLOT) << 2);
    memory.copy(changetype<usize>(used), changetype<usize>(this.used), <usize>old << 2);
    memory.copy(changetype<usize>(epoch), changetype<usize>(this.epoch), <usize>old << 2);
    memory.copy(changetype<usize>(remote), changetype<usize>(this.remote), <usize>(old * PER_SLOT) << 2);
    memory.copy(changetype<usize>(remoteUsed), changetype<usize>(this.remoteUsed), <usize>old << 2);
    this.hash = hash; this.count = count; this.used = used; this.epoch = epoch;
    this.remote = remote; this.remoteUsed = remoteUsed;
  }

  /** Whether another VM streams adapter hash `h` from `slot` (as of the last exchange). */
  private remoteHas(slot: i32, h: u32): bool {
    const base = slot * PER_SLOT;
    const u = unchecked(this.remoteUsed[slot]);
    for (let k = 0; k < u; k++) if (unchecked(this.remote[base + k]) == h) return true;
    return false;
  }

  /** Before an exchange is read: the other VMs' streams are forgotten. */
  clearRemote(): void {
    for (let s = 0; s < this.remoteUsed.length; s++) unchecked(this.remoteUsed[s] = 0);
  }

  /** Another VM streams adapter hash `h` from `slot`; false when the slot has PER_SLOT such adapters already. */
  addRemote(slot: i32, h: u32): bool {
    if (slot < 0) return false;
    if (slot >= this.used.length) this.grow(slot);
    if (this.remoteHas(slot, h)) return true;
    const u = unchecked(this.remoteUsed[slot]);
    if (u >= PER_SLOT) return false;
    unchecked(this.remote[slot * PER_SLOT + u] = h);
    unchecked(this.remoteUsed[slot] = u + 1);
    return true;
  }

  /** This VM's streaming adapters at `slot` (for the exchange): how many, and the k-th one's hash. */
  ownCount(slot: i32): i32 { return slot >= 0 && slot < this.used.length ? unchecked(this.used[slot]) : 0; }
  @inline ownHash(slot: i32, k: i32): u32 { return unchecked(this.hash[slot * PER_SLOT + k]); }

  /** Entry of adapter hash `h` at `slot`, −1: none. */
  private find(slot: i32, h: u32): i32 {
    if (slot < 0 || slot >= this.used.length) return -1;
    const base = slot * PER_SLOT;
    const u = unchecked(this.used[slot]);
    for (let k = 0; k < u; k++) if (unchecked(this.hash[base + k]) == h) return base + k;
    return -1;
  }

  /** A request for adapter hash `h` got its first response byte from `slot`; the ticket goes to end(). */
  start(slot: i32, h: u32): i64 {
    if (slot < 0) return NO_TICKET;
    if (slot >= this.used.length) this.grow(slot);
    let e = this.find(slot, h);
    if (e < 0) {
      const u = unchecked(this.used[slot]);
      if (u >= PER_SLOT) { this.dropped++; return NO_TICKET; }
      e = slot * PER_SLOT + u;
      unchecked(this.hash[e] = h);
      unchecked(this.count[e] = 0);
      unchecked(this.used[slot] = u + 1);
    }
    unchecked(this.count[e]++);
    return (<i64>unchecked(this.epoch[slot]) << 32) | <i64>slot;
  }

  /** The stream of `ticket` (adapter hash `h`) ended. A ticket from before its slot was forgotten does nothing. */
  end(ticket: i64, h: u32): void {
    if (ticket < 0) return;
    const slot = <i32>(ticket & 0xffffffff);
    if (slot >= this.used.length || <i64>unchecked(this.epoch[slot]) != (ticket >>> 32)) return;
    const e = this.find(slot, h);
    if (e < 0) return;
    const c = unchecked(this.count[e]) - 1;
    if (c > 0) { unchecked(this.count[e] = c); return; }
    // keep the slot's entries packed: the last one takes this place
    const last = slot * PER_SLOT + unchecked(this.used[slot]) - 1;
    unchecked(this.hash[e] = unchecked(this.hash[last]));
    unchecked(this.count[e] = unchecked(this.count[last]));
    unchecked(this.used[slot]--);
  }

  /** The slot now names another address (or none): its streams are forgotten, their tickets void. */
  forgetSlot(slot: i32): void {
    if (slot < 0 || slot >= this.used.length) return;
    unchecked(this.used[slot] = 0);
    unchecked(this.remoteUsed[slot] = 0);
    unchecked(this.epoch[slot]++);
  }

  /** Whether any adapter streams from `slot` (this VM's, or another VM's as of the last exchange). */
  anyAt(slot: i32): bool {
    return slot >= 0 && slot < this.used.length && unchecked(this.used[slot]) + unchecked(this.remoteUsed[slot]) > 0;
  }

  /** Requests for adapter hash `h` streaming from `slot`. */
  streaming(slot: i32, h: u32): i32 {
    const e = this.find(slot, h);
    return e < 0 ? 0 : unchecked(this.count[e]);
  }

  /**
   * What the streams say of a request for adapter hash `h` at `slot`, whose instance holds at most
   * `maxLoras` adapters at once (≤ 0: unknown).
   */
  state(slot: i32, h: u32, maxLoras: i32): i32 {
    if (slot < 0 || slot >= this.used.length) return STREAMS_UNKNOWN;
    const u = unchecked(this.used[slot]), ru = unchecked(this.remoteUsed[slot]);
    if (u + ru == 0) return STREAMS_UNKNOWN;
    if (this.find(slot, h) >= 0 || this.remoteHas(slot, h)) return STREAMS_RUNNING;
    if (maxLoras <= 0) return STREAMS_UNKNOWN;
    // distinct adapters: this VM's, and the others' it does not stream itself
    let distinct = u;
    const base = slot * PER_SLOT;
    for (let k = 0; k < ru && distinct < maxLoras; k++) if (this.find(slot, unchecked(this.remote[base + k])) < 0) distinct++;
    return distinct >= maxLoras ? STREAMS_FULL : STREAMS_UNKNOWN;
  }
}

/**
 * The extra cost (ms) of candidate i for adapter column `col` once the streams are known, from the
 * scrape's (filter-model.ts modelCostMs: `extra`, finite): 0 where the adapter streams, a drain
 * (adapterLoadMs + E[S]) where other adapters hold every slot; `run[i]` is set to 1 where it streams.
 * Base models and columns < 0 keep `extra`.
 */
export function streamedCostMs(lp: LlmPlan, streams: AdapterStreams, col: i32, i: i32, slot: i32, extra: f64, adapterLoadMs: f64, run: StaticArray<u8>): f64 {
  unchecked(run[i] = 0);
  // isBase: some candidate serves the model as its base (an instance's BASE flag sets it)
  if (col < 0 || unchecked(lp.isBase[col])) return extra;
  const st = streams.state(slot, unchecked(lp.hashes[col]), unchecked(lp.maxLoras[i]));
  if (st == STREAMS_RUNNING) { unchecked(run[i] = 1); return 0; }
  if (st == STREAMS_FULL) {
    const drain = adapterLoadMs + unchecked(lp.esMs[i]);
    return extra > drain ? extra : drain;
  }
  return extra;
}

/**
 * Whether the adapter of column `col` may have drained from candidate i since the scrape: the
 * scrape showed it running (`extra` 0 after streamedCostMs) with every LoRA slot held, and what
 * streams there now is other adapters' only. A request for it then waits for a running adapter to
 * drain. Its state is unknown; the critical picker prices it as a load (the least that wait can
 * be), so an instance where it streams wins at an equal price (docs/benchmarks/llm-r15a.md: a
 * critical request waited 12 s for a slot on such an instance, priced 2 ms under one where its
 * adapter streamed). Standard requests keep the scrape's price: charged to every request, the
 * doubt moved adapter requests off their prefix holders (prefix-heavy P50 worse on 3 of 3 seeds).
 */
export function mayHaveDrained(lp: LlmPlan, streams: AdapterStreams, col: i32, i: i32, slot: i32, extra: f64, run: StaticArray<u8>): bool {
  if (extra != 0 || col < 0 || unchecked(lp.isBase[col]) || unchecked(run[i]) != 0) return false;
  return unchecked(lp.loraRoom[i]) == 0 && streams.anyAt(slot);
}
