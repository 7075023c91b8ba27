// The requests this worker VM sent to a service's instances lately, as send times (issue 20,
// docs/benchmarks/llm-r9b.md): how many arrive at an instance while a prefill sent there waits and
// computes. The price's delay term (score-request.ts) charges a request's uncached prefill to the
// requests it holds up there. Those queued ahead are counted (PendingPrefill.requestsIn); the ones
// that will arrive behind it were taken to be as many as are ahead, which holds at a steady queue
// and fails where the queue is growing: on an idle worker in a burst nothing is ahead, and a miss
// sent there looked free of delay while hundreds of requests arrived within its prefill. Measured
// instead: the rate of this VM's sends (those within one whole prefill of the request), shared out
// over the instances (arrivalsAt), over the request's time to first token there.
//
// Bounded: RECENT_SENDS send times in a ring; beyond the bound the count is the bound (a count
// too low, never too high: it can only make a candidate look less delayed, as before this term).

export const RECENT_SENDS: i32 = 256;

export class RecentSends {
  /** Send times (ms, the request clock), oldest at `head` once the ring is full. */
  private at: StaticArray<f64> = new StaticArray<f64>(RECENT_SENDS);
  private head: i32 = 0;
  private count: i32 = 0;

  /** One request sent at `nowMs` (times are non-decreasing; an earlier one is recorded as the latest). */
  record(nowMs: f64): void {
    if (!(nowMs == nowMs)) return;
    const last = this.count > 0 ? unchecked(this.at[(this.head + this.count - 1) % RECENT_SENDS]) : -Infinity;
    const t = nowMs < last ? last : nowMs;
    if (this.count < RECENT_SENDS) {
      unchecked(this.at[(this.head + this.count) % RECENT_SENDS] = t);
      this.count++;
    } else {
      unchecked(this.at[this.head] = t);
      this.head = (this.head + 1) % RECENT_SENDS;
    }
  }

  /** Sends at or after nowMs − windowMs (binary search over the ring, oldest first). */
  within(nowMs: f64, windowMs: f64): i32 {
    if (this.count == 0 || !(windowMs > 0)) return 0;
    const from = nowMs - windowMs;
    let lo = 0, hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (unchecked(this.at[(this.head + mid) % RECENT_SENDS]) < from) lo = mid + 1;
      else hi = mid;
    }
    return this.count - lo;
  }
}

/** Requests expected to arrive at one of `instances` within one window: the sends within it, spread evenly. */
export function arrivalsPerInstance(sends: i32, instances: i32): f64 {
  return instances > 0 && sends > 0 ? <f64>sends / <f64>instances : 0;
}

/**
 * Requests expected to arrive at one instance within one window, where requests follow the
 * prompt blocks each instance holds (prefix-aware routing sends a request where its prefix is):
 * the sends within the window, in the share of the prefill this VM has made that instance compute
 * — `sentI` there, `sentAll` over the service's instances — with this request's own `ownMs` added
 * where it would go (a miss makes its instance hold the prompt, so its hits follow it there). With
 * no prefill sent anywhere: spread evenly over `instances`.
 */
export function arrivalsAt(sends: i32, sentI: f64, sentAll: f64, ownMs: f64, instances: i32): f64 {
  if (sends <= 0) return 0;
  const own = ownMs > 0 && ownMs < Infinity ? ownMs : 0;
  const mine = (sentI > 0 && sentI < Infinity ? sentI : 0) + own;
  const all = (sentAll > 0 && sentAll < Infinity ? sentAll : 0) + own;
  if (!(all > 0)) return arrivalsPerInstance(sends, instances);
  return <f64>sends * (mine < all ? mine : all) / all;
}
