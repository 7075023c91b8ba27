// In-flight request counts per instance address, shared across worker VMs.
//
// Each VM counts its own requests exactly (up when an instance is chosen, down at stream end) and
// publishes them on its tick into one shared-data document; it reads the other VMs' counts from
// the same document. The request path touches only local arrays; other workers' counts are at most
// one tick (refreshMs) old. Sections of VMs that stopped publishing (gone workers) expire.
//
// Shared document: repeated sections `u32 vmToken, u64 updatedAtMs, u16 count,
// count × (u8 addrLen, addr, u32 inflight)`; only non-zero counts are written.
import { AddrSections, AddrSectionWriter, concatSections } from "./shared-doc";
import { getI, setI, getU } from "./slot-array";

/**
 * Ticks of in-flight history kept per slot: at refreshMs 20, 640 ms -- a scrape is adopted at most
 * a publication interval (250 ms) plus the long poll's delivery and a tick after it is taken.
 */
export const HISTORY: i32 = 32;

/** Stream handle for "no slot held". */
export const NO_HOLD: i64 = -1;

export class Inflight {
  private slots: Map<string, i32> = new Map();
  /** Address per slot ("" while the slot is free). */
  private addrs: Array<string> = [];
  local: Array<i32> = [];
  remote: Array<i32> = [];
  /** local + remote + the other proxies' increase since the scrape (meshDelta), indexed by slot: what the picker reads. */
  total: Array<i32> = [];
  /**
   * Other proxies' in-flight count per slot, from the agent's last answer (lib/mesh-inflight.ts;
   * -1: unknown -- no answer, expired, or mesh in-flight off), and its value at the scrape in force.
   */
  private meshNow: Array<i32> = [];
  private meshAt: Array<i32> = [];
  /**
   * The last HISTORY ticks' counts per slot (own, and the other proxies' -1 = unknown), slot-major,
   * and the tick times (ring, shared by every slot): rebase takes the counts AT the scrape, not at
   * the snapshot's adoption up to a publication interval later -- requests sent in between are in
   * neither the scraped queue nor (were the reference taken at adoption) the increase.
   */
  private ownHist: Array<i32> = [];
  private meshHist: Array<i32> = [];
  private histAt: StaticArray<f64> = new StaticArray<f64>(HISTORY);
  private histHead: i32 = -1;
  /**
   * When the other proxies' counts in force were taken (ms, this VM's clock; -1: unknown), and per
   * tick of the ring the same for the counts recorded then. An answer sums the other proxies' last
   * reports, each up to a report interval (and, across agents, an exchange) old: the counts that
   * describe the instant of a scrape arrive that much after it. The reference "the other proxies'
   * counts at the scrape" is the first tick whose counts were taken at or after the scrape, not the
   * first tick after it (that one holds counts from before the scrape: the sends and completions
   * of the last report interval before the scrape are in the scraped queue AND, as they reach the
   * answers, in the change since -- counted twice, for the whole scrape interval).
   */
  meshInfoMs: f64 = -1;
  private meshInfoAt: StaticArray<f64> = new StaticArray<f64>(HISTORY);
  /** Per slot: the scrape time whose other-proxies reference waits for counts taken after it (-1: none). */
  private meshWait: Array<f64> = [];
  /**
   * Generation per slot, bumped when the slot is freed: a stream that still holds the old
   * generation releases nothing (its count went with the slot).
   */
  gen: Array<u32> = [];
  /** Per slot: the agent's scrape time of the data in force, and our in-flight count then. */
  private scrapeAt: Array<f64> = [];
  private atScrape: Array<i32> = [];
  /** Per slot: the plan build (epoch) that last used it, and since when no plan has (-1: in use). */
  private usedIn: Array<u32> = [];
  private unusedSince: Array<f64> = [];
  private freeSlots: Array<i32> = [];
  /**
   * The slots holding an address, dense, and each slot's index in it (-1: free). Every per-tick
   * loop over slots (sweep, merge, encode here; in-band sync, fusion and sharing; pending prefill)
   * walks this list, so a tick costs the live fleet, not every slot address churn ever allocated
   * (issue 24 #2: 6.2 ms per tick 40 s after the churn, 0.11 ms before). The free slots at the
   * top are given back after each sweep (trimTail), and the lowest free slot is reused first.
   */
  private liveSlots: Array<i32> = [];
  private livePos: Array<i32> = [];
  private epoch: u32 = 0;
  private live: i32 = 0;
  /** Generation a slot regrown above a trimmed top starts at (no stale handle matches it). */
  private genFloor: u32 = 0;
  /** Scratch for this VM's section of the shared document (encodeOwn). */
  private writer: AddrSectionWriter = new AddrSectionWriter();

  /** Starts a plan build: the slots asked for (slotFor) until the next one are the live ones. */
  beginEpoch(): void { this.epoch++; }

  /** The slot of `addr`, allocated (or a freed one reused) on first use; marks it live. */
  slotFor(addr: string): i32 {
    let s: i32;
    if (this.slots.has(addr)) {
      s = this.slots.get(addr);
    } else if (this.freeSlots.length > 0) {
      s = this.freeSlots.pop();
      this.forgetHistory(s);
      this.slots.set(addr, s);
      this.addrs[s] = addr;
      this.addLive(s);
    } else {
      s = this.addrs.length;
      this.slots.set(addr, s);
      this.addrs.push(addr);
      this.local.push(0);
      this.remote.push(0);
      this.total.push(0);
      this.meshNow.push(-1);
      this.meshAt.push(-1);
      this.meshWait.push(-1);
      this.gen.push(this.genFloor);
      this.scrapeAt.push(-1);
      this.atScrape.push(0);
      this.usedIn.push(0);
      this.unusedSince.push(-1);
      this.livePos.push(-1);
      for (let h = 0; h < HISTORY; h++) { this.ownHist.push(-1); this.meshHist.push(-1); }
      this.addLive(s);
    }
    this.usedIn[s] = this.epoch;
    this.unusedSince[s] = -1;
    return s;
  }

  /**
   * Frees the slots no plan has used for `graceMs` (an address gone from the snapshots): state is
   * bounded by the live fleet plus what churned within the grace. Returns how many were freed.
   */
  sweep(nowMs: f64, graceMs: f64): i32 {
    let freed = 0;
    const live = this.liveSlots;
    // backwards: a removal moves the last entry (already visited) into its place
    for (let k = live.length - 1; k >= 0; k--) {
      const s = unchecked(live[k]);
      if (this.usedIn[s] == this.epoch) continue;
      const since = this.unusedSince[s];
      if (since < 0) { this.unusedSince[s] = nowMs; continue; }
      if (nowMs - since < graceMs) continue;
      this.slots.delete(this.addrs[s]);
      this.addrs[s] = "";
      this.local[s] = 0;
      this.remote[s] = 0;
      this.total[s] = 0;
      this.meshNow[s] = -1;
      this.meshAt[s] = -1;
      this.meshWait[s] = -1;
      this.gen[s]++;
      this.scrapeAt[s] = -1;
      this.atScrape[s] = 0;
      this.unusedSince[s] = -1;
      this.freeSlots.push(s);
      this.removeLive(s);
      freed++;
    }
    if (freed > 0) this.trimTail();
    return freed;
  }

  private addLive(s: i32): void {
    this.livePos[s] = this.liveSlots.length;
    this.liveSlots.push(s);
    this.live++;
  }

  private removeLive(s: i32): void {
    const k = this.livePos[s];
    const last = this.liveSlots.pop();
    if (last != s) { this.liveSlots[k] = last; this.livePos[last] = k; }
    this.livePos[s] = -1;
    this.live--;
  }

  /**
   * Gives back the free slots above the highest live one (the per-slot arrays shrink), and orders
   * the rest so the lowest is reused first: after churn the table settles at the live fleet's size
   * as its addresses come and go. A slot given back keeps its generation count in `gen` only while
   * below the top; a stream still holding a trimmed slot releases nothing (release checks bounds
   * and generation, and a regrown slot starts at the generation after the highest ever used).
   */
  private trimTail(): void {
    let n = this.addrs.length;
    while (n > 0 && this.addrs[n - 1].length == 0) n--;
    if (n < this.addrs.length) {
      for (let s = n; s < this.addrs.length; s++) if (this.gen[s] + 1 > this.genFloor) this.genFloor = this.gen[s] + 1;
      this.addrs.length = n; this.local.length = n; this.remote.length = n; this.total.length = n; this.gen.length = n;
      this.meshNow.length = n; this.meshAt.length = n; this.meshWait.length = n;
      this.ownHist.length = n * HISTORY; this.meshHist.length = n * HISTORY;
      this.scrapeAt.length = n; this.atScrape.length = n; this.usedIn.length = n; this.unusedSince.length = n; this.livePos.length = n;
      const kept = new Array<i32>();
      for (let i = 0; i < this.freeSlots.length; i++) if (this.freeSlots[i] < n) kept.push(this.freeSlots[i]);
      this.freeSlots = kept;
    }
    this.freeSlots.sort((a: i32, b: i32): i32 => b - a); // pop() takes the lowest
  }

  /** Slots holding an address, in no particular order; read-only. What per-tick loops walk. */
  liveList(): Array<i32> { return this.liveSlots; }

  /**
   * Our in-flight count when the agent scraped the instance's queue. The agent republishes the
   * same scrape several times (every publication interval): the reference point moves only when
   * the scrape does, so requests sent since the scrape keep counting.
   */
  rebase(slot: i32, scrapeAtMs: f64): i32 {
    const prev = this.scrapeAt[slot];
    if (prev < 0 || Math.abs(scrapeAtMs - prev) > 2) {
      this.scrapeAt[slot] = scrapeAtMs;
      // the counts at the scrape (the first tick after it), else the counts now
      const k = this.historyAt(scrapeAtMs);
      const own = k >= 0 ? unchecked(this.ownHist[slot * HISTORY + k]) : -1;
      this.atScrape[slot] = own >= 0 ? own : this.own(slot);
      // the other proxies' counts at the scrape: the first tick whose counts were taken after it;
      // none recorded yet: the counts in force if they are that new, else those provisionally,
      // settled on the first tick that has counts taken after the scrape (record)
      const km = this.meshHistoryAt(scrapeAtMs);
      this.meshWait[slot] = -1;
      if (km >= 0) {
        this.meshAt[slot] = unchecked(this.meshHist[slot * HISTORY + km]);
      } else {
        this.meshAt[slot] = this.meshNow[slot];
        if (!(this.meshInfoMs >= scrapeAtMs)) this.meshWait[slot] = scrapeAtMs;
      }
      this.total[slot] = this.own(slot) + meshDelta(this.meshNow[slot], this.meshAt[slot]);
    }
    return this.atScrape[slot];
  }

  /**
   * Every tick, after the merge: this tick's counts into the history (HISTORY ints per live slot
   * and counter; the live fleet).
   */
  record(nowMs: f64): void {
    const head = (this.histHead + 1) % HISTORY;
    this.histHead = head;
    unchecked(this.histAt[head] = nowMs);
    const info = this.meshInfoMs;
    unchecked(this.meshInfoAt[head] = info);
    const live = this.liveSlots;
    for (let k = 0; k < live.length; k++) {
      const s = unchecked(live[k]);
      const wait = unchecked(this.meshWait[s]);
      if (wait >= 0 && info >= wait) {
        // the first counts taken after the slot's scrape: its reference (rebase)
        unchecked(this.meshWait[s] = -1);
        unchecked(this.meshAt[s] = this.meshNow[s]);
        unchecked(this.total[s] = this.own(s) + meshDelta(this.meshNow[s], this.meshAt[s]));
      }
      unchecked(this.ownHist[s * HISTORY + head] = this.own(s));
      unchecked(this.meshHist[s * HISTORY + head] = this.meshNow[s]);
    }
  }

  /**
   * The ring index of the first tick after `t` (the oldest recorded if all are after it); -1: no
   * tick after it (the scrape is not older than the last tick: the counts now are the closest), or
   * nothing recorded. After, not before: a request sent in the tick before the scrape is in its
   * queue, one sent in the tick after counts from the next scrape -- the error is one tick either
   * way, and this one is what a snapshot adopted within the tick of its scrape always had.
   */
  private historyAt(t: f64): i32 {
    if (this.histHead < 0) return -1;
    let found = -1;
    for (let i = 0; i < HISTORY; i++) {
      const k = (this.histHead - i + HISTORY) % HISTORY;
      const at = unchecked(this.histAt[k]);
      if (at <= 0 && i > 0) break; // not filled yet
      if (at <= t + 2) break; // the same ms rounding as the scrape time (rebase)
      found = k;
    }
    return found;
  }

  /**
   * The ring index of the oldest tick whose other-proxies counts were taken at or after `t`
   * (meshInfoAt); -1: no such tick (none recorded yet, or the counts in force are older).
   */
  private meshHistoryAt(t: f64): i32 {
    if (this.histHead < 0) return -1;
    let found = -1;
    for (let i = 0; i < HISTORY; i++) {
      const k = (this.histHead - i + HISTORY) % HISTORY;
      const at = unchecked(this.histAt[k]);
      if (at <= 0 && i > 0) break; // not filled yet
      if (!(unchecked(this.meshInfoAt[k]) >= t)) break; // unknown (-1), or taken before t
      found = k;
    }
    return found;
  }

  /** A slot given to a new address has no past. */
  private forgetHistory(s: i32): void {
    for (let h = 0; h < HISTORY; h++) { unchecked(this.ownHist[s * HISTORY + h] = -1); unchecked(this.meshHist[s * HISTORY + h] = -1); }
  }

  /** This proxy's own in-flight count to `slot` (this VM's and the other workers'): what it reports to its agent. */
  own(slot: i32): i32 { return getI(this.local.dataStart, slot) + getI(this.remote.dataStart, slot); }

  /** The other proxies' count to `slot` (-1: unknown); read-only. */
  meshCount(slot: i32): i32 { return unchecked(this.meshNow[slot]); }

  /**
   * How many more requests the other proxies have in flight to `slot` than they had `windowMs`
   * before `nowMs` (0 when unknown): the LLM price's stand-in for the other proxies' pending
   * prefill, which no count carries (score-request.ts). A request sent within the last windowMs --
   * the prefill of a request of the size being priced -- is taken to be still prefilling; the
   * counts are dated by when they were taken (meshInfoMs / meshInfoAt), so the reference is the
   * newest recorded tick whose counts were taken at or before nowMs - windowMs (the history
   * reaches back HISTORY ticks: the oldest known counts then, which can only count short). Counts
   * in force taken before the window, unknown counts (no answer, expired, off), a slot with no
   * known past, or a decrease: 0 -- exactly the price without it, never cheaper.
   */
  meshRecent(slot: i32, nowMs: f64, windowMs: f64): i32 {
    if (slot < 0 || slot >= this.meshNow.length) return 0;
    const now = unchecked(this.meshNow[slot]);
    const from = nowMs - windowMs;
    if (now < 0 || !(this.meshInfoMs > from) || this.histHead < 0) return 0;
    let ref = -1;
    for (let i = 0; i < HISTORY; i++) {
      const k = (this.histHead - i + HISTORY) % HISTORY;
      const at = unchecked(this.histAt[k]);
      if (at <= 0 && i > 0) break; // not filled yet
      const info = unchecked(this.meshInfoAt[k]);
      const c = unchecked(this.meshHist[slot * HISTORY + k]);
      if (!(info >= 0) || c < 0) break; // unknown from here back
      ref = c;
      if (info <= from) break; // taken before the window: the reference
    }
    return ref >= 0 && now > ref ? now - ref : 0;
  }

  /** Sets the other proxies' in-flight count to `slot` (-1: unknown) and the slot's total. */
  setMesh(slot: i32, n: i32): void {
    unchecked(this.meshNow[slot] = n);
    unchecked(this.total[slot] = this.own(slot) + meshDelta(n, unchecked(this.meshAt[slot])));
  }

  /** Every live slot's remote count becomes unknown (the agent's answer expired): today's price. */
  forgetMesh(): void {
    this.meshInfoMs = -1;
    const live = this.liveSlots;
    for (let k = 0; k < live.length; k++) this.setMesh(unchecked(live[k]), -1);
  }

  /** The other VMs' count to `slot` read between ticks (their gauges, lib/xvm.ts), and the slot's total. */
  setRemote(slot: i32, n: i32): void {
    unchecked(this.remote[slot] = n);
    unchecked(this.total[slot] = unchecked(this.local[slot]) + n + meshDelta(unchecked(this.meshNow[slot]), unchecked(this.meshAt[slot])));
  }

  // (the request path's counts by pointer: lib/slot-array.ts; `slot` is a slot the caller holds)
  inc(slot: i32): void {
    const l = this.local.dataStart, t = this.total.dataStart;
    setI(l, slot, getI(l, slot) + 1);
    setI(t, slot, getI(t, slot) + 1);
  }

  dec(slot: i32): void {
    const l = this.local.dataStart, t = this.total.dataStart;
    if (getI(l, slot) > 0) { setI(l, slot, getI(l, slot) - 1); setI(t, slot, getI(t, slot) - 1); }
  }

  /** Counts a request sent to `slot`; the handle (slot and generation) is what release() takes. */
  acquire(slot: i32): i64 {
    this.inc(slot);
    return (<i64>getU(this.gen.dataStart, slot) << 32) | <i64>slot;
  }

  /** Ends a request; nothing if the slot was freed (and perhaps reused) since it was acquired. */
  release(handle: i64): void {
    if (handle < 0) return;
    const slot = <i32>(handle & 0xffffffff);
    if (slot < this.gen.length && <i64>getU(this.gen.dataStart, slot) == (handle >>> 32)) this.dec(slot);
  }

  /** The slot of `addr`, or -1 (never allocates). */
  slotOf(addr: string): i32 { return this.slots.has(addr) ? this.slots.get(addr) : -1; }

  /** Address per slot ("" = free); read-only. */
  addresses(): Array<string> { return this.addrs; }

  /** Addresses holding a slot. */
  size(): i32 { return this.live; }

  /** Slots allocated (live + free for reuse): the high-water mark of size(). */
  capacity(): i32 { return this.addrs.length; }

  /** This VM's section (allocates the section only: this runs on every tick). */
  encodeOwn(token: u32, nowMs: u64): ArrayBuffer {
    const w = this.writer;
    w.begin();
    const live = this.liveSlots;
    for (let k = 0; k < live.length; k++) {
      const i = unchecked(live[k]);
      const c = unchecked(this.local[i]);
      if (c > 0) w.add(unchecked(this.addrs[i]), <u32>c);
    }
    return w.finish(token, nowMs);
  }

  /**
   * Reads the shared document: sums other live VMs' counts into `remote`, and returns the
   * document to write back (expired sections dropped, ours replaced). Malformed input ends the
   * read there (what follows is dropped from the returned document).
   */
  merge(doc: ArrayBuffer, token: u32, nowMs: u64, maxAgeMs: u64): ArrayBuffer {
    const live = this.liveSlots;
    for (let k = 0; k < live.length; k++) unchecked(this.remote[unchecked(live[k])] = 0); // free slots are 0 already
    const r = new AddrSections(doc, token, nowMs, maxAgeMs);
    while (r.next()) {
      const addr = r.addr();
      // Only addresses in our plans matter; others (a VM ahead of us on snapshots) are
      // picked up on the tick after we adopt them. Never allocate here: the document is input.
      if (this.slots.has(addr)) this.remote[this.slots.get(addr)] += <i32>load<u32>(r.valuePtr);
    }
    for (let k = 0; k < live.length; k++) {
      const i = unchecked(live[k]);
      unchecked(this.total[i] = this.local[i] + this.remote[i] + meshDelta(this.meshNow[i], this.meshAt[i]));
    }
    r.keep.push(this.encodeOwn(token, nowMs));
    return concatSections(r.keep);
  }
}

/**
 * What the other proxies' in-flight count adds to an instance's backlog: its change since the
 * scrape in force (the scrape's queue already holds the requests in flight then), as our own
 * count's change is priced: sends since the scrape add, completions since the scrape subtract (a
 * central picker sees both; clamping the decrease at 0 measured 1.24-1.38x the all-seeing
 * LEAST_REQUEST at K = 64 instead of 0.99x, docs/benchmarks/mesh-inflight.md). 0 when either
 * count is unknown (no answer, expired, off): exactly the price without mesh in-flight, so
 * unknown never makes an instance cheaper. The backlog itself stays >= 0 (plan.ts).
 */
export function meshDelta(now: i32, atScrape: i32): i32 {
  if (now < 0 || atScrape < 0) return 0;
  return now - atScrape;
}

/** xorshift32: deterministic, seedable; AssemblyScript's Math.random needs a host seed import Envoy lacks. */
export class Rng {
  constructor(public state: u32) {
    // Scramble the seed (xorshift's first outputs from small seeds are small) and avoid 0.
    this.state = (state ^ 0x9e3779b9) * 0x85ebca6b;
    if (this.state == 0) this.state = 0x9e3779b9;
    for (let i = 0; i < 4; i++) this.next();
  }
  next(): f64 {
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x;
    return <f64>x / 4294967296.0;
  }
}
