// The prefill this proxy sent ahead to each instance and that is not done yet (by the request-aware
// cost's estimate), per in-flight slot, shared across worker VMs (docs/architecture-choice.md,
// "Pending prefill").
//
// The request path reads and charges only local arrays: `own` (this VM's charges) and `others`
// (the other VMs' charges as of the last exchange). On the tick each VM reads one shared-data
// document, folds the other live VMs' sections into `others`, and writes the document back (CAS)
// with its own section replaced — the in-flight table's exchange (lib/inflight.ts), in a document
// of its own so that body-blind configurations neither read nor write it.
//
// Section (little-endian): u32 vmToken, u64 publishedAtMs, u16 count, count × (u8 addrLen, addr,
// f32 aheadMs) — aheadMs: how long the prefill this VM sent to addr still takes at publishedAtMs;
// only addresses with prefill ahead are written. Records name the instance by address (each VM
// numbers its slots itself); an address the reader holds no slot for is skipped.
import { AddrSections, AddrSectionWriter, concatSections, ADDR_SECTION_HEADER_BYTES } from "./shared-doc";
import { Inflight } from "./inflight";
import { SharedPrefill } from "./shared-prefill";

export const PENDING_SECTION_HEADER_BYTES: i32 = ADDR_SECTION_HEADER_BYTES;

/** Spans of this VM's queue kept per slot (requestsIn): the requests in it are counted exactly
 *  while its busy period holds at most this many charges. A fixed bound per slot (the slots are
 *  bounded by the live fleet); beyond it two adjacent spans merge (the pair with the fewest
 *  requests), their requests spread evenly over the merged span. */
export const QUEUE_SPANS: i32 = 16;

export class PendingPrefill {
  /** Per slot: when the prefill this VM sent there is done (ms, the request clock; 0: none). */
  own: StaticArray<f64> = new StaticArray<f64>(0);
  /** Per slot: when the prefill the other VMs sent there is done, as of the last exchange (0: none). */
  others: StaticArray<f64> = new StaticArray<f64>(0);
  /** Per slot, QUEUE_SPANS spans of this VM's charges since its queue was last empty, oldest first
   *  (contiguous: each charge starts where the one before it ends): start, end (ms, the request
   *  clock) and the requests in it; `spanN` of them used. What turns ms queued into requests. */
  spanStart: StaticArray<f64> = new StaticArray<f64>(0);
  spanEnd: StaticArray<f64> = new StaticArray<f64>(0);
  spanReqs: StaticArray<f64> = new StaticArray<f64>(0);
  spanN: StaticArray<i32> = new StaticArray<i32>(0);
  /** Per slot: all the prefill this VM has sent there since the slot was given to its instance
   *  (ms): the prompt blocks it made that instance compute and hold, the share of the arrivals
   *  that follow them (recent-sends.ts arrivalsAt). */
  sent: StaticArray<f64> = new StaticArray<f64>(0);
  /** Per slot: the prompts this VM sent there that no instance held (no cached block anywhere)
   *  since the slot was given to its instance: the prefixes it made that instance hold, whose
   *  hits still to come follow them there (choice/scorer-holds.ts). */
  starts: StaticArray<f64> = new StaticArray<f64>(0);
  /** Per slot: the in-flight generation the values belong to (a freed and reused slot starts empty). */
  private gen: StaticArray<u32> = new StaticArray<u32>(0);
  /** Records of other VMs skipped: a value not finite or negative (written by a broken VM). */
  invalid: u64 = 0;
  /** The in-flight table's capacity at the last sync. */
  private synced: i32 = 0;
  /** Which leading prompt blocks this VM's pending charges compute, per slot (shared-prefill.ts). */
  spans: SharedPrefill = new SharedPrefill();
  /** Scratch for this VM's section (encodeOwn). */
  private writer: AddrSectionWriter = new AddrSectionWriter();

  /** Covers slots below `n` (the in-flight table's capacity: the live fleet). */
  grow(n: i32): void {
    if (this.own.length >= n) return;
    const o = new StaticArray<f64>(n), r = new StaticArray<f64>(n), g = new StaticArray<u32>(n);
    const K = QUEUE_SPANS;
    const ss = new StaticArray<f64>(n * K), se = new StaticArray<f64>(n * K), sr = new StaticArray<f64>(n * K);
    const sn = new StaticArray<i32>(n);
    const sm = new StaticArray<f64>(n), st = new StaticArray<f64>(n);
    for (let k = 0; k < this.own.length * K; k++) {
      unchecked(ss[k] = this.spanStart[k]); unchecked(se[k] = this.spanEnd[k]); unchecked(sr[k] = this.spanReqs[k]);
    }
    for (let k = 0; k < this.own.length; k++) {
      unchecked(sn[k] = this.spanN[k]);
      unchecked(sm[k] = this.sent[k]);
      unchecked(st[k] = this.starts[k]);
      unchecked(o[k] = this.own[k]);
      unchecked(r[k] = this.others[k]);
      unchecked(g[k] = this.gen[k]);
    }
    this.own = o;
    this.spanStart = ss; this.spanEnd = se; this.spanReqs = sr; this.spanN = sn;
    this.sent = sm;
    this.starts = st;
    this.others = r;
    this.gen = g;
    this.spans.grow(n);
  }

  /** After the in-flight table freed or reused slots: those slots' prefill is forgotten. */
  sync(capacity: i32, gen: Array<u32>, live: Array<i32> | null = null): void {
    this.grow(capacity);
    const n = min(capacity, gen.length);
    // slots the in-flight table gave back at its top (Inflight trimTail): forgotten once, as a
    // freed slot is (a slot regrown there has a new generation and is cleared again below)
    for (let s = n; s < this.synced && s < this.own.length; s++) this.forget(s);
    this.synced = n;
    // the live slots only when given (issue 24 #2): a free slot is cleared when it is reused
    const m = live != null ? live.length : n;
    for (let k = 0; k < m; k++) {
      const s = live != null ? unchecked(live[k]) : k;
      if (s >= n) continue;
      const g = unchecked(gen[s]);
      if (unchecked(this.gen[s]) == g) continue;
      unchecked(this.gen[s] = g);
      this.forget(s);
    }
  }

  /** Slot `s` starts empty: no prefill ahead (this VM's or the others'), none sent, no prefixes held. */
  private forget(s: i32): void {
    unchecked(this.own[s] = 0);
    unchecked(this.others[s] = 0);
    unchecked(this.spanN[s] = 0);
    unchecked(this.sent[s] = 0);
    unchecked(this.starts[s] = 0);
    this.spans.clear(s);
  }

  /** All the prefill this VM sent to `slot` since it was given to its instance (ms). */
  @inline sentMs(slot: i32): f64 {
    return slot >= 0 && slot < this.sent.length ? unchecked(this.sent[slot]) : 0;
  }

  /** The prompts no instance held that this VM sent to `slot` since it was given to its instance. */
  @inline startsAt(slot: i32): f64 {
    return slot >= 0 && slot < this.starts.length ? unchecked(this.starts[slot]) : 0;
  }

  /** This VM sent `slot` a prompt no instance held: the slot now holds one prefix more. */
  started(slot: i32): void {
    if (slot < 0) return;
    if (slot >= this.own.length) this.grow(slot + 1);
    unchecked(this.starts[slot] = this.starts[slot] + 1);
  }

  /** The prefill sent to `slot` by this proxy (every VM) still ahead at `nowMs`. */
  @inline aheadMs(slot: i32, nowMs: f64): f64 {
    if (slot < 0 || slot >= this.own.length) return 0;
    const a = unchecked(this.own[slot]) - nowMs, b = unchecked(this.others[slot]) - nowMs;
    return (a > 0 ? a : 0) + (b > 0 ? b : 0);
  }

  /** The part of aheadMs this VM sent itself (live here, not as of the last exchange). */
  @inline ownAheadMs(slot: i32, nowMs: f64): f64 {
    if (slot < 0 || slot >= this.own.length) return 0;
    const a = unchecked(this.own[slot]) - nowMs;
    return a > 0 ? a : 0;
  }

  /** This VM sent `ms` of prefill to `slot` at `nowMs`: it queues behind what this VM sent before. */
  charge(slot: i32, nowMs: f64, ms: f64): void {
    if (slot < 0 || !(ms > 0) || ms == Infinity) return;
    if (slot >= this.own.length) this.grow(slot + 1);
    const at = unchecked(this.own[slot]);
    const start = at > nowMs ? at : nowMs;
    unchecked(this.own[slot] = start + ms);
    unchecked(this.sent[slot] = this.sent[slot] + ms);
    this.addSpan(slot, nowMs, start, start + ms, at > nowMs);
  }

  /** The charge [start, end) joins the slot's spans; `busy`: the queue had not emptied (else a new busy period). */
  private addSpan(slot: i32, nowMs: f64, start: f64, end: f64, busy: bool): void {
    const K = QUEUE_SPANS, base = slot * K;
    let m = busy ? unchecked(this.spanN[slot]) : 0;
    // spans done by now are out of every count: dropped (oldest first)
    let done = 0;
    while (done < m && unchecked(this.spanEnd[base + done]) <= nowMs) done++;
    if (done > 0) {
      for (let k = done; k < m; k++) this.moveSpan(base + k, base + k - done);
      m -= done;
    }
    if (m == K) {
      // full: merge the adjacent pair with the fewest requests
      let at = 0, least = Infinity;
      for (let k = 0; k + 1 < m; k++) {
        const r = unchecked(this.spanReqs[base + k]) + unchecked(this.spanReqs[base + k + 1]);
        if (r < least) { least = r; at = k; }
      }
      unchecked(this.spanEnd[base + at] = this.spanEnd[base + at + 1]);
      unchecked(this.spanReqs[base + at] = least);
      for (let k = at + 2; k < m; k++) this.moveSpan(base + k, base + k - 1);
      m--;
    }
    unchecked(this.spanStart[base + m] = start);
    unchecked(this.spanEnd[base + m] = end);
    unchecked(this.spanReqs[base + m] = 1);
    unchecked(this.spanN[slot] = m + 1);
  }

  @inline private moveSpan(from: i32, to: i32): void {
    unchecked(this.spanStart[to] = this.spanStart[from]);
    unchecked(this.spanEnd[to] = this.spanEnd[from]);
    unchecked(this.spanReqs[to] = this.spanReqs[from]);
  }

  /**
   * How many requests the last `ms` of this VM's queue at `slot` are (counted back from its end,
   * so the part a request shares at the front is left out): each charge is one request over its
   * own span of the queue, the one being computed counted by the share of it left. A cached prefix
   * makes most charges a few blocks: a group's first request (227 ms) then three suffixes (13 ms
   * each) are 4 requests, and 133 ms later still 3.4 — the suffixes all wait behind the rest of the
   * first — where the busy period's mean charge (66.5 ms) said 2. Exact up to QUEUE_SPANS charges
   * in a busy period, then merged spans spread their requests evenly. Beyond this VM's charges (the
   * prefill is other VMs', or none recorded): `wholeMs`, the prefill of a request of this size.
   */
  requestsIn(slot: i32, ms: f64, wholeMs: f64): f64 {
    if (!(ms > 0)) return 0;
    let n: f64 = 0;
    let rest = ms;
    if (slot >= 0 && slot < this.spanN.length) {
      const base = slot * QUEUE_SPANS;
      const from = unchecked(this.own[slot]) - ms;
      for (let k = unchecked(this.spanN[slot]) - 1; k >= 0; k--) {
        const s = unchecked(this.spanStart[base + k]), e = unchecked(this.spanEnd[base + k]);
        if (e <= from) break;
        const lo = s > from ? s : from;
        if (e > s) n += unchecked(this.spanReqs[base + k]) * (e - lo) / (e - s);
        rest -= e - lo;
      }
    }
    if (rest > 1e-9 && wholeMs > 0) n += rest / wholeMs;
    return n;
  }

  /**
   * As charge(), for a request whose prompt hashed to `hashes[0..nh)`, blocks below `from` already
   * sent to `slot`, at `blockMs` of prefill per block there: the span its prefill computes is noted
   * for later requests that share it (shared-prefill.ts).
   */
  chargeBlocks(slot: i32, nowMs: f64, ms: f64, hashes: StaticArray<u64>, nh: i32, from: i32, blockMs: f64): void {
    if (slot < 0 || !(ms > 0) || ms == Infinity) return;
    if (slot >= this.own.length) this.grow(slot + 1);
    const at = unchecked(this.own[slot]);
    const start = at > nowMs ? at : nowMs;
    this.charge(slot, nowMs, ms);
    this.spans.note(slot, hashes, nh, from, start, unchecked(this.own[slot]), blockMs, nowMs);
  }

  /** The part of this VM's prefill ahead at `slot` that a request with these prompt blocks shares (shared-prefill.ts). */
  sharedMs(slot: i32, nowMs: f64, hashes: StaticArray<u64>, nh: i32, matched: i32): f64 {
    if (slot < 0 || slot >= this.own.length) return 0;
    const own = unchecked(this.own[slot]) - nowMs;
    if (!(own > 0)) return 0;
    const s = this.spans.sharedMs(slot, hashes, nh, matched, nowMs);
    return s < own ? s : own;
  }

  /** This VM's section: the addresses (of `addrs`, by slot) with prefill ahead at `nowMs`. */
  encodeOwn(token: u32, nowMs: u64, addrs: Array<string>, live: Array<i32> | null = null): ArrayBuffer {
    const now = <f64>nowMs;
    const n = min(addrs.length, this.own.length);
    const w = this.writer;
    w.begin();
    const m = live != null ? live.length : n;
    for (let k = 0; k < m; k++) {
      const s = live != null ? unchecked(live[k]) : k;
      if (s >= n) continue;
      const until = unchecked(this.own[s]);
      const a = unchecked(addrs[s]);
      if (until > now && a.length > 0) w.add(a, reinterpret<u32>(<f32>(until - now)));
    }
    return w.finish(token, nowMs);
  }

  /**
   * Reads the shared document: the other live VMs' prefill ahead, per slot, into `others` (summed:
   * the instance works through all of it), and returns the document to write back (expired
   * sections dropped, ours replaced). A malformed section ends the read there.
   */
  merge(doc: ArrayBuffer, token: u32, nowMs: u64, maxAgeMs: u64, inflight: Inflight): ArrayBuffer {
    const now = <f64>nowMs;
    this.grow(inflight.capacity());
    const others = this.others;
    const live = inflight.liveList();
    // only live slots can hold a value (slotOf below never returns a free one)
    for (let k = 0; k < live.length; k++) { const s = unchecked(live[k]); if (s < others.length) unchecked(others[s] = 0); }
    const r = new AddrSections(doc, token, nowMs, maxAgeMs);
    while (r.next()) {
      const v = <f64>load<f32>(r.valuePtr);
      if (!(v >= 0) || v == Infinity) { this.invalid++; continue; }
      const rest = <f64>r.at + v - now;
      // never allocate a slot here: the document is input
      const slot = rest > 0 ? inflight.slotOf(r.addr()) : -1;
      if (slot >= 0 && slot < others.length) unchecked(others[slot] += rest);
    }
    // summed remainders as one "done at" time: exact for one other VM, the sum of the work for several
    for (let k = 0; k < live.length; k++) { const s = unchecked(live[k]); if (s < others.length && unchecked(others[s]) > 0) unchecked(others[s] += now); }
    r.keep.push(this.encodeOwn(token, nowMs, inflight.addresses(), live));
    return concatSections(r.keep);
  }
}
