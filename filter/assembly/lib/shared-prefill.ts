// Pending prefill that a later request shares (docs/architecture-choice.md, "Shared pending prefill").
//
// The pending prefill this proxy sent to an instance (pending-prefill.ts) is a wait ahead of a new
// request — except the part that computes the very prompt blocks the new request starts with. An
// engine with automatic prefix caching keys full KV blocks by a chain hash of the tokens up to
// them; vLLM V1 commits a request's full blocks to that table when it schedules the chunk that
// computes them (KVCacheManager.allocate_slots → cache_blocks, before the forward pass), so a later
// request with the same leading blocks, scheduled in the same step behind it (FIFO) or in a later
// one, finds them as computed and prefills only its own suffix. That shared part is work the
// instance does whether or not the new request goes there; sent elsewhere, the request would add
// all of it again (at least as much as what is left of it here). So it is not priced as a wait
// ahead of the request: what a candidate is charged is the work queued there that the request does
// not share plus the work it adds. (Its first token still waits for the shared blocks: by at most
// what is left of them, which is no more than it would spend prefilling them itself elsewhere.)
// Engines that register blocks only after computing them (this project's simulator) recompute for
// a twin admitted in the same step; the price then errs by one step's share, not by the prefix.
//
// Which pending prefill computes which blocks: per slot, SPANS charges of this VM that
// prefilled new leading blocks (a new one replaces one no longer pending, else the narrowest pending
// one if that is no wider: SharedPrefill.victim), each with its chain hashes at every CHECK_STRIDE-th block
// (and its last) — a later request shares blocks [from, j] of a span when its own chain hash at block j
// equals the span's (the chain hash covers blocks 0..j). Only this VM's charges are known by block;
// the other VMs' pending prefill (pending-prefill.ts `others`) stays a wait, never made cheaper.
// Bounded by the live fleet: SPANS × CHECKS hashes per in-flight slot.

export const SPANS: i32 = 4;
export const CHECK_STRIDE: i32 = 16;
/** checkpoints per span: the strided ones of at most 256 blocks (prefix index bound) and the last */
export const CHECKS: i32 = 256 / CHECK_STRIDE + 1;

/**
 * The part of a shared prefill still pending at `nowMs`: a charge queued to start at `startMs`
 * computes its blocks in order, the shared ones (`sharedMs` of prefill) first.
 */
export function sharedPendingMs(startMs: f64, sharedMs: f64, nowMs: f64): f64 {
  if (!(sharedMs > 0) || sharedMs == Infinity) return 0;
  const left = startMs + sharedMs - nowMs;
  if (!(left > 0)) return 0;
  return left < sharedMs ? left : sharedMs;
}

export class SharedPrefill {
  /** Per slot × SPANS: when the charge starts (ms, request clock) and is done (0: empty). */
  start: StaticArray<f64> = new StaticArray<f64>(0);
  done: StaticArray<f64> = new StaticArray<f64>(0);
  /** Prefill ms per block at the slot when charged. */
  blockMs: StaticArray<f64> = new StaticArray<f64>(0);
  /** First new block (the ones before were already sent there) and the number of blocks hashed. */
  from: StaticArray<i32> = new StaticArray<i32>(0);
  upto: StaticArray<i32> = new StaticArray<i32>(0);
  /** Per slot × SPANS × CHECKS: chain hash at block index checkIndex(k, upto). */
  hash: StaticArray<u64> = new StaticArray<u64>(0);
  /** Per slot: one byte (its length is the slots covered). */
  private next: StaticArray<u8> = new StaticArray<u8>(0);

  grow(n: i32): void {
    const have = this.next.length;
    if (have >= n) return;
    const s = new StaticArray<f64>(n * SPANS), d = new StaticArray<f64>(n * SPANS), b = new StaticArray<f64>(n * SPANS);
    const f = new StaticArray<i32>(n * SPANS), u = new StaticArray<i32>(n * SPANS);
    const h = new StaticArray<u64>(n * SPANS * CHECKS), nx = new StaticArray<u8>(n);
    memory.copy(changetype<usize>(s), changetype<usize>(this.start), <usize>(have * SPANS * 8));
    memory.copy(changetype<usize>(d), changetype<usize>(this.done), <usize>(have * SPANS * 8));
    memory.copy(changetype<usize>(b), changetype<usize>(this.blockMs), <usize>(have * SPANS * 8));
    memory.copy(changetype<usize>(f), changetype<usize>(this.from), <usize>(have * SPANS * 4));
    memory.copy(changetype<usize>(u), changetype<usize>(this.upto), <usize>(have * SPANS * 4));
    memory.copy(changetype<usize>(h), changetype<usize>(this.hash), <usize>(have * SPANS * CHECKS * 8));
    memory.copy(changetype<usize>(nx), changetype<usize>(this.next), <usize>have);
    this.start = s; this.done = d; this.blockMs = b; this.from = f; this.upto = u; this.hash = h; this.next = nx;
  }

  /** The slot was freed or reused: its spans are forgotten. */
  clear(slot: i32): void {
    if (slot < 0 || slot >= this.next.length) return;
    for (let k = 0; k < SPANS; k++) unchecked(this.done[slot * SPANS + k] = 0);
  }

  /**
   * This VM sent a request whose prompt hashed to `hashes[0..nh)` to `slot`, its prefill queued
   * over [startMs, doneMs], blocks below `from` already sent there (not computed again).
   */
  note(slot: i32, hashes: StaticArray<u64>, nh: i32, from: i32, startMs: f64, doneMs: f64, blockMs: f64, nowMs: f64 = -Infinity): void {
    if (slot < 0 || nh > hashes.length || from < 0 || from >= nh || !(doneMs > startMs) || !(blockMs > 0) || blockMs == Infinity) return;
    if (slot >= this.next.length) this.grow(slot + 1);
    const top = nh < CHECKS * CHECK_STRIDE ? nh : CHECKS * CHECK_STRIDE;
    const k = this.victim(slot, nowMs, top - from);
    if (k < 0) return;
    const e = slot * SPANS + k;
    unchecked(this.start[e] = startMs); unchecked(this.done[e] = doneMs); unchecked(this.blockMs[e] = blockMs);
    unchecked(this.from[e] = from); unchecked(this.upto[e] = top);
    for (let c = 0; c < CHECKS; c++) {
      const j = checkIndex(c, top);
      unchecked(this.hash[e * CHECKS + c] = j >= 0 ? unchecked(hashes[j]) : 0);
    }
  }

  /**
   * The span a new one of `width` blocks replaces at `slot`: one no longer pending at `nowMs`;
   * else the narrowest pending one, the earliest done among equals — if it is not wider than the
   * new one (-1: the new span is narrower than every pending one and is not kept). Not in turn:
   * the requests that follow a group's first one each charge only their own suffix (a few blocks
   * no later request shares), and four of them in turn evicted the span computing the group's
   * 2,048-token prefix while it was still pending — from the sixth request of a cold burst's group
   * on, the holder looked 227 ms dearer than an idle worker and the group split; and among the
   * prefix spans of several groups queued at one worker, the newest group's is the one its next
   * requests share.
   */
  private victim(slot: i32, nowMs: f64, width: i32): i32 {
    let k = -1, fewest = i32.MAX_VALUE;
    let earliest = Infinity;
    for (let j = 0; j < SPANS; j++) {
      const e = slot * SPANS + j;
      const done = unchecked(this.done[e]);
      if (!(done > nowMs)) return j;
      const w = unchecked(this.upto[e]) - unchecked(this.from[e]);
      if (w < fewest || (w == fewest && done < earliest)) { fewest = w; earliest = done; k = j; }
    }
    return fewest <= width ? k : -1;
  }

  /**
   * The pending prefill at `slot` that a request whose prompt hashed to `hashes[0..nh)`, with
   * `matched` leading blocks sent there, shares at `nowMs` (ms; 0: none).
   */
  sharedMs(slot: i32, hashes: StaticArray<u64>, nh: i32, matched: i32, nowMs: f64): f64 {
    if (slot < 0 || slot >= this.next.length || matched <= 0) return 0;
    const lim = min(min(matched, nh), hashes.length);
    let total: f64 = 0;
    for (let k = 0; k < SPANS; k++) {
      const e = slot * SPANS + k;
      if (!(unchecked(this.done[e]) > nowMs)) continue;
      const from = unchecked(this.from[e]), top = unchecked(this.upto[e]);
      // the deepest checkpoint within the request's matched blocks whose chain hash agrees
      for (let c = CHECKS - 1; c >= 0; c--) {
        const j = checkIndex(c, top);
        if (j < from || j >= lim) continue;
        if (unchecked(hashes[j]) != unchecked(this.hash[e * CHECKS + c])) continue;
        total += sharedPendingMs(unchecked(this.start[e]), <f64>(j + 1 - from) * unchecked(this.blockMs[e]), nowMs);
        break;
      }
    }
    return total;
  }
}

/** Block index of checkpoint c of a span of `top` blocks: every CHECK_STRIDE-th, the last one last (-1: none). */
@inline function checkIndex(c: i32, top: i32): i32 {
  if (c == CHECKS - 1) return top - 1;
  const j = (c + 1) * CHECK_STRIDE - 1;
  return j < top - 1 ? j : -1;
}
