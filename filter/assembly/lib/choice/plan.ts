// One service's candidates laid out as flat arrays (struct of arrays), built once per snapshot: the
// per-request stages read contiguous memory instead of chasing one object per instance.
//   backlog_i = max(0, qAdj_i + n_i),  cost_i = bw_i + backlog_i · pw_i
// with bw = baseWait/weight, pw = (E[S]/c)/weight, qAdj = q − n_scrape, n_i our in-flight count now.
import { Candidate } from "./candidate";
import { SKIP_NONE, SKIP_REASONS } from "./skip";
import { saturationThreshold } from "./filter-saturated";

export class Pick {
  index: i32 = -1;
  /** Eligible candidates considered. */
  eligible: i32 = 0;
  /** Candidates the picker chose from (2 for p2c, the band's size for band). */
  considered: i32 = 0;
  /** The in-band probe may replace the choice (false for request-aware picks: the probe knows no model filter). */
  probe: bool = true;
  /** plan.cost holds every candidate's price for this pick (a full scoring pass ran). */
  scored: bool = false;

  @inline reset(): Pick { this.index = -1; this.eligible = 0; this.considered = 0; this.probe = true; this.scored = false; return this; }
}

/** What a full scoring pass found (reused scratch). */
export class Scan {
  eligible: i32 = 0;
  saturated: i32 = 0;
  best: f64 = Infinity;
}

export class Plan {
  n: i32;
  addr: Array<string>;
  addrBytes: Array<ArrayBuffer>;
  skip: StaticArray<i32>;
  slot: StaticArray<i32>;
  /** 1: the instance is in another cloud (peer set): reached through a gateway, never a fallback (fallbacks.ts). */
  remote: StaticArray<u8>;
  staleAtMs: StaticArray<f64>;
  bw: StaticArray<f64>;
  pw: StaticArray<f64>;
  qAdj: StaticArray<f64>;
  slots: StaticArray<f64>;
  rho: StaticArray<f64>;
  /** 1 where slots is a floor, not a capacity (candidate.ts) */
  slotsFloor: StaticArray<u8>;
  /** 1 where the server's own queue keeps growing (candidate.ts) */
  queueGrowing: StaticArray<u8>;
  // kept for the debug header
  baseWaitMs: StaticArray<f64>;
  perItemMs: StaticArray<f64>;
  /** Candidate.overflow*: the price of one skipped by its P99 alone, for the overflow (queue: less ours at the snapshot). */
  ovBase: StaticArray<f64>;
  ovPer: StaticArray<f64>;
  ovQ: StaticArray<f64>;
  /** Scratch: cost of each candidate for the current pick (+Inf: not eligible). */
  cost: StaticArray<f64>;
  /** Saturation threshold per candidate, fixed per snapshot (filter-saturated.ts). */
  satAt: StaticArray<f64>;
  /**
   * When every eligible candidate is saturated: true leaves them all out (the service's
   * all-ineligible policy `reject-503` sheds the request), false (`forward-degraded`, the default)
   * applies the overflow rule of the load-independent pick (filter-saturated.ts overflowTo).
   */
  shedSaturated: bool = false;
  /** Earliest staleAtMs of the candidates not statically skipped: before it, nothing is stale. */
  minStaleAtMs: f64 = Infinity;
  /** Indices of the candidates not statically skipped (p2c draws from these). */
  elig: StaticArray<i32>;
  nElig: i32 = 0;
  /** Static skips per reason: what a full scan would count on every request. */
  staticSkipped: StaticArray<i64>;
  hasStaticSkips: bool = false;
  /** The result of the last pick and the scan scratch (reused: the request path allocates nothing). */
  result: Pick = new Pick();
  scan: Scan = new Scan();
  /** Choices and skips made since the last flush to host metrics (one host call per tick, not per request). */
  chosen: StaticArray<i64>;
  skipped: StaticArray<i64>;

  constructor(cands: Array<Candidate>, maxUtilization: f64 = 0.95) {
    const n = cands.length;
    this.n = n;
    this.addr = new Array<string>(n);
    this.addrBytes = new Array<ArrayBuffer>(n);
    this.skip = new StaticArray<i32>(n);
    this.slot = new StaticArray<i32>(n);
    this.remote = new StaticArray<u8>(n);
    this.staleAtMs = new StaticArray<f64>(n);
    this.bw = new StaticArray<f64>(n);
    this.pw = new StaticArray<f64>(n);
    this.qAdj = new StaticArray<f64>(n);
    this.slots = new StaticArray<f64>(n);
    this.rho = new StaticArray<f64>(n);
    this.slotsFloor = new StaticArray<u8>(n);
    this.queueGrowing = new StaticArray<u8>(n);
    this.baseWaitMs = new StaticArray<f64>(n);
    this.perItemMs = new StaticArray<f64>(n);
    this.ovBase = new StaticArray<f64>(n);
    this.ovPer = new StaticArray<f64>(n);
    this.ovQ = new StaticArray<f64>(n);
    this.cost = new StaticArray<f64>(n);
    this.satAt = new StaticArray<f64>(n);
    this.staticSkipped = new StaticArray<i64>(SKIP_REASONS);
    let ne = 0;
    for (let i = 0; i < n; i++) if (cands[i].skip == SKIP_NONE) ne++;
    this.elig = new StaticArray<i32>(ne);
    this.chosen = new StaticArray<i64>(n);
    this.skipped = new StaticArray<i64>(SKIP_REASONS);
    for (let i = 0; i < n; i++) {
      const c = cands[i];
      this.addr[i] = c.addr;
      this.addrBytes[i] = c.addrBytes;
      this.skip[i] = c.skip;
      this.slot[i] = c.slot;
      this.remote[i] = c.peer.length > 0 ? 1 : 0;
      this.staleAtMs[i] = c.staleAtMs;
      const inv = c.weight > 0 ? 1.0 / c.weight : Infinity;
      this.bw[i] = c.baseWaitMs * inv;
      this.pw[i] = c.perItemMs * inv;
      this.qAdj[i] = c.queue - <f64>c.inflightAtSnapshot;
      this.slots[i] = c.slots;
      this.rho[i] = c.rho;
      this.slotsFloor[i] = c.slotsFloor ? 1 : 0;
      this.queueGrowing[i] = c.queueGrowing ? 1 : 0;
      this.baseWaitMs[i] = c.baseWaitMs;
      this.perItemMs[i] = c.perItemMs;
      this.ovBase[i] = c.overflowBaseMs;
      this.ovPer[i] = c.overflowPerMs;
      this.ovQ[i] = c.overflowQueue - <f64>c.inflightAtSnapshot;
      this.satAt[i] = saturationThreshold(c.rho, maxUtilization, c.slots);
      if (c.skip == SKIP_NONE) {
        if (c.staleAtMs < this.minStaleAtMs) this.minStaleAtMs = c.staleAtMs;
        this.elig[this.nElig++] = i;
      } else {
        this.staticSkipped[c.skip]++;
        this.hasStaticSkips = true;
      }
    }
  }

  /** Requests ahead at candidate i given our in-flight count now (debug header). */
  backlog(i: i32, inflightNow: i32): f64 {
    const b = this.qAdj[i] + <f64>inflightNow;
    return b > 0 ? b : 0;
  }

  /** Expected time (ms, before de-weighting) of candidate i given our in-flight count now. */
  waitMs(i: i32, inflightNow: i32): f64 {
    return this.baseWaitMs[i] + this.backlog(i, inflightNow) * this.perItemMs[i];
  }

  /** Adds the static skips to the counters, as a full scan would have counted them. */
  @inline countStaticSkips(): void {
    if (this.hasStaticSkips) for (let r = 1; r < SKIP_REASONS; r++) unchecked(this.skipped[r] += unchecked(this.staticSkipped[r]));
  }
}
