// Load-aware instance choice (pure). Follows the Gateway API Inference Extension scheduler's
// shape: filters (eligibility) → scorer (expected time) → picker.
//
// Expected time in system for the next request sent to an instance, in ms:
//   W = E[S]                                              service
//     + n · E[S] / c                                      backlog: n requests ahead, c slots
//     + ρ·E[S²] / (2·E[S]·(1 − ρ))     (model "mg1" only)  M/G/1 Pollaczek–Khinchine queueing delay
//     + RTT                                               the link's round trip, for remote instances
// n = max(0, q + n_now − n_scrape): q is the queue (waiting + running) the agent saw at its last
// scrape of the instance; n_now − n_scrape is what this proxy has added (or drained) since then —
// our own in-flight requests, counted across all worker VMs. That term is what stops herding:
// every request we send makes the instance look busier at once, not a second later.
//
// The seed article writes the M/G/1 term as ρ·E[S²]/(2(1−ρ)), which is in ms², not ms: the mean
// queueing delay is λ·E[S²]/(2(1−ρ)) with λ = ρ/E[S]. And it is the *unconditional* mean over all
// queue states, computed from a ρ averaged over the agent's window. Once the proxy knows the queue
// (q plus its own in-flight delta), the conditional estimate above is better: in the routing
// simulation (bench/routing) the M/G/1 term made P99 1.5–3× worse, because a lagging ρ outweighs
// what the proxy knows now. So model "conditional" (the default) leaves the term out; "mg1" keeps
// it, for operators who want the seed's model.
//
// Saturated: ρ >= maxUtilization *and* no free slot by our live estimate (n >= c); a windowed ρ
// alone lags by seconds, and an instance with a free slot right now is not saturated. Saturated
// instances are skipped when a non-saturated one has a free slot; when every eligible instance is
// saturated the service's all-ineligible policy applies. In between (some saturated, the others
// busy too) they stay in the ranking: excluding them would only pile the load onto the rest, which
// then saturate in turn (bench/routing: P99 9x LEAST_REQUEST at fleet ρ 0.95 with a hard cut-off).
// De-weighted (health score in [0.5, 0.8)): the cost is divided by the weight.
import { InstanceState } from "./snapshot";
import { Rng } from "./inflight";

export const SKIP_NONE: i32 = 0;
export const SKIP_UNHEALTHY: i32 = 1;
export const SKIP_SATURATED: i32 = 2;
export const SKIP_SLOW: i32 = 3;
export const SKIP_STALE: i32 = 4;
export const SKIP_LINK: i32 = 5;
export const SKIP_REASONS: i32 = 6;

export const MODEL_CONDITIONAL: i32 = 0;
export const MODEL_MG1: i32 = 1;
export const PICKER_P2C: i32 = 0;
export const PICKER_BAND: i32 = 1;

export function skipName(r: i32): string {
  switch (r) {
    case SKIP_UNHEALTHY: return "unhealthy";
    case SKIP_SATURATED: return "saturated";
    case SKIP_SLOW: return "slow";
    case SKIP_STALE: return "stale";
    case SKIP_LINK: return "link_degraded";
    default: return "none";
  }
}

/**
 * M/G/1 mean time in system (ms), Pollaczek–Khinchine: ρ·E[S²]/(2·E[S]·(1 − ρ)) + E[S].
 * ρ is capped at 0.99 so that the term stays finite (saturation is decided separately).
 */
export function mg1WaitMs(rho: f64, esMs: f64, es2Ms2: f64): f64 {
  const es = esMs > 0 ? esMs : 0;
  if (es == 0) return 0;
  const r = rho > 0 ? (rho < 0.99 ? rho : 0.99) : 0;
  const es2 = es2Ms2 > es * es ? es2Ms2 : es * es; // E[S²] >= E[S]² always
  return r * es2 / (2 * es * (1 - r)) + es;
}

/** 1 while P99 <= 3× baseline, then 3·baseline/P99 (so 0.8 at 3.75×, 0.5 at 6×). */
export function healthScore(p99Ms: f64, baselineMs: f64): f64 {
  if (!(baselineMs > 0) || !(p99Ms > 0)) return 1;
  const limit = 3 * baselineMs;
  return p99Ms <= limit ? 1 : limit / p99Ms;
}

/** The seed's progressive de-weighting: >= 0.8 full weight, 0.5–0.8 weight = score, < 0.5 out. */
export function weightFor(score: f64): f64 {
  if (score >= 0.8) return 1;
  if (score >= 0.5) return score;
  return 0;
}

export class Candidate {
  addr: string = "";
  addrBytes: ArrayBuffer = new ArrayBuffer(0);
  peer: string = "";
  /** The load-independent part of W: E[S] (+ the M/G/1 term) (+ RTT). */
  baseWaitMs: f64 = 0;
  /** E[S]/c: what each request ahead adds. */
  perItemMs: f64 = 0;
  queue: f64 = 0;
  slots: f64 = 1;
  rho: f64 = 0;
  weight: f64 = 1;
  /** Static skip reason (unhealthy, link, slow); saturation and staleness are decided per request. */
  skip: i32 = SKIP_NONE;
  /** Absolute time (ms) from which this instance's data is too old. */
  staleAtMs: f64 = 0;
  /** When the agent scraped the data (generatedAt − dataAgeMs): the queue q is as of then. */
  scrapeAtMs: f64 = 0;
  /** In-flight slot (see Inflight) and our in-flight count at that scrape. */
  slot: i32 = 0;
  inflightAtSnapshot: i32 = 0;
  /** Metric id of this instance's choice counter (set by the glue). */
  metricId: u32 = 0;
}

/**
 * Static, per-snapshot parts of one instance. linkRttMs is the measured round trip to the
 * instance's cloud (0 for local instances): a remote instance must be that much faster.
 */
export function candidateFrom(s: InstanceState, model: i32, stalenessMs: f64, generatedAtMs: f64, linkDegraded: bool,
  linkRttMs: f64 = 0): Candidate {
  const c = new Candidate();
  c.addr = s.addr;
  c.addrBytes = String.UTF8.encode(s.addr);
  c.peer = s.peer;
  // f32 on the wire: compare thresholds in f32 (0.95 is 0.949999988 as f64).
  c.rho = s.rho == s.rho ? <f64>s.rho : 0;
  const es = s.esMs > 0 ? <f64>s.esMs : 0;
  c.slots = s.slots >= 1 ? <f64>s.slots : 1;
  c.perItemMs = es / c.slots;
  c.baseWaitMs = (model == MODEL_MG1 ? mg1WaitMs(c.rho, es, <f64>s.es2Ms2) : es) + (linkRttMs > 0 ? linkRttMs : 0);
  c.queue = s.queueDepth > 0 ? <f64>s.queueDepth : 0;
  c.weight = weightFor(healthScore(<f64>s.p99Ms, <f64>s.baselineP99Ms));
  c.scrapeAtMs = generatedAtMs - <f64>s.dataAgeMs;
  c.staleAtMs = c.scrapeAtMs + stalenessMs;
  if (!s.healthy) c.skip = SKIP_UNHEALTHY;
  else if (linkDegraded) c.skip = SKIP_LINK;
  else if (c.weight == 0) c.skip = SKIP_SLOW;
  return c;
}

/** Requests ahead of the next one: the scraped queue plus what we added since. */
export function backlog(c: Candidate, inflightNow: i32): f64 {
  const n = c.queue + <f64>(inflightNow - c.inflightAtSnapshot);
  return n > 0 ? n : 0;
}

/** Cost (de-weighted W) of sending the next request to c, given our in-flight count now. */
export function costMs(c: Candidate, inflightNow: i32): f64 {
  return (c.baseWaitMs + backlog(c, inflightNow) * c.perItemMs) / c.weight;
}

/** ρ at or above the limit and no free slot by our live estimate. */
export function isSaturated(rho: f64, maxUtilization: f64, backlogNow: f64, slots: f64): bool {
  return !(<f32>rho < <f32>maxUtilization) && backlogNow >= slots;
}

export class Pick {
  index: i32 = -1;
  /** Eligible candidates considered. */
  eligible: i32 = 0;
  /** Candidates the picker chose from (2 for p2c, the band's size for band). */
  considered: i32 = 0;
}

/**
 * One service's candidates laid out as flat arrays (struct of arrays): the per-request scan reads
 * contiguous memory instead of chasing one object per instance. Built once per snapshot version:
 *   backlog_i = max(0, qAdj_i + n_i),  cost_i = bw_i + backlog_i · pw_i
 * with bw = baseWait/weight, pw = (E[S]/c)/weight, qAdj = q − n_scrape, n_i our in-flight count now.
 */
export class Plan {
  n: i32;
  addr: Array<string>;
  addrBytes: Array<ArrayBuffer>;
  metricId: StaticArray<u32>;
  skip: StaticArray<i32>;
  slot: StaticArray<i32>;
  staleAtMs: StaticArray<f64>;
  bw: StaticArray<f64>;
  pw: StaticArray<f64>;
  qAdj: StaticArray<f64>;
  slots: StaticArray<f64>;
  rho: StaticArray<f64>;
  // kept for the debug header
  baseWaitMs: StaticArray<f64>;
  perItemMs: StaticArray<f64>;
  /** Scratch: cost of each candidate for the current pick (+Inf: not eligible). */
  cost: StaticArray<f64>;
  /**
   * Saturation threshold per candidate, fixed per snapshot: slots when ρ >= maxUtilization, else
   * +Inf -- "saturated" is then one compare per request (backlog >= satAt).
   */
  satAt: StaticArray<f64>;
  /** Earliest staleAtMs of the candidates not statically skipped: before it, nothing is stale. */
  minStaleAtMs: f64 = Infinity;
  /** Indices of the candidates not statically skipped (p2c draws from these). */
  elig: StaticArray<i32>;
  nElig: i32 = 0;
  /** Static skips per reason: what a full scan would count on every request. */
  staticSkipped: StaticArray<i64>;
  hasStaticSkips: bool = false;
  /** The result of the last pick (reused: the request path allocates nothing). */
  result: Pick = new Pick();
  /** Choices and skips made since the last flush to host metrics (one host call per tick, not per request). */
  chosen: StaticArray<i64>;
  skipped: StaticArray<i64>;

  constructor(cands: Array<Candidate>, maxUtilization: f64 = 0.95) {
    const n = cands.length;
    this.n = n;
    this.addr = new Array<string>(n);
    this.addrBytes = new Array<ArrayBuffer>(n);
    this.metricId = new StaticArray<u32>(n);
    this.skip = new StaticArray<i32>(n);
    this.slot = new StaticArray<i32>(n);
    this.staleAtMs = new StaticArray<f64>(n);
    this.bw = new StaticArray<f64>(n);
    this.pw = new StaticArray<f64>(n);
    this.qAdj = new StaticArray<f64>(n);
    this.slots = new StaticArray<f64>(n);
    this.rho = new StaticArray<f64>(n);
    this.baseWaitMs = new StaticArray<f64>(n);
    this.perItemMs = new StaticArray<f64>(n);
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
      this.metricId[i] = c.metricId;
      this.skip[i] = c.skip;
      this.slot[i] = c.slot;
      this.staleAtMs[i] = c.staleAtMs;
      const inv = c.weight > 0 ? 1.0 / c.weight : Infinity;
      this.bw[i] = c.baseWaitMs * inv;
      this.pw[i] = c.perItemMs * inv;
      this.qAdj[i] = c.queue - <f64>c.inflightAtSnapshot;
      this.slots[i] = c.slots;
      this.rho[i] = c.rho;
      this.baseWaitMs[i] = c.baseWaitMs;
      this.perItemMs[i] = c.perItemMs;
      this.satAt[i] = !(<f32>c.rho < <f32>maxUtilization) ? c.slots : Infinity;
      if (c.skip == SKIP_NONE) {
        if (c.staleAtMs < this.minStaleAtMs) this.minStaleAtMs = c.staleAtMs;
        this.elig[this.nElig++] = i;
      } else {
        this.staticSkipped[c.skip]++;
        this.hasStaticSkips = true;
      }
    }
  }

  backlog(i: i32, inflightNow: i32): f64 {
    const b = this.qAdj[i] + <f64>inflightNow;
    return b > 0 ? b : 0;
  }

  /** Expected time (ms, before de-weighting) of candidate i given our in-flight count now. */
  waitMs(i: i32, inflightNow: i32): f64 {
    return this.baseWaitMs[i] + this.backlog(i, inflightNow) * this.perItemMs[i];
  }
}

@inline function backlogAt(plan: Plan, inflightP: usize, i: i32): f64 {
  const b = unchecked(plan.qAdj[i]) + <f64>load<i32>(inflightP + (<usize>unchecked(plan.slot[i]) << 2));
  return b > 0 ? b : 0;
}

/** Index of the k-th (0-based) candidate with a finite cost. */
function nthEligible(cost: usize, n: i32, k: i32): i32 {
  for (let i = 0; i < n; i++) {
    if (load<f64>(cost + (<usize>i << 3)) < Infinity) {
      if (k == 0) return i;
      k--;
    }
  }
  return -1;
}

/**
 * Picks an instance; skips are counted in plan.skipped as if every candidate were scored.
 *  - PICKER_P2C: two distinct eligible candidates at random, the cheaper one — robust when many
 *    proxies decide at once on the same data, since they do not all converge on one "best".
 *    Only the two drawn are scored unless one is saturated or data may be stale (full scan).
 *    Uniform draws, not draws by capacity c/E[S]: measured in bench/routing, those gained little
 *    on a fleet of mixed speeds, nothing on near-equal instances, and lost with 4 proxies
 *    (docs/benchmarks.md);
 *  - PICKER_BAND: scores every candidate, then uniformly among those within (1 + band) of the
 *    cheapest.
 * `inflight` is indexed by plan.slot.
 */
export function pick(plan: Plan, inflight: Array<i32>, nowMs: f64, picker: i32, band: f64, rng: Rng): Pick {
  const p = plan.result;
  p.index = -1;
  p.eligible = 0;
  p.considered = 0;
  const n = plan.n;
  const inflightP = inflight.dataStart;
  if (picker == PICKER_P2C && plan.nElig >= 2 && nowMs < plan.minStaleAtMs) {
    // O(1) p2c: two distinct candidates from the statically eligible ones. Nothing is stale yet, so
    // they are eligible unless saturated right now; then (rare below fleet ρ 0.9) the full scan
    // below decides, since the saturation rule depends on every instance's free slots. Rejecting
    // pairs that hold a saturated instance keeps the draw uniform over the others.
    const m = plan.nElig;
    const ka = <i32>(rng.next() * <f64>m) % m;
    let kb = <i32>(rng.next() * <f64>(m - 1)) % (m - 1);
    if (kb >= ka) kb++;
    const ia = unchecked(plan.elig[ka]);
    const ib = unchecked(plan.elig[kb]);
    const ba = backlogAt(plan, inflightP, ia);
    const bb = backlogAt(plan, inflightP, ib);
    if (ba < unchecked(plan.satAt[ia]) && bb < unchecked(plan.satAt[ib])) {
      const ca = unchecked(plan.bw[ia]) + ba * unchecked(plan.pw[ia]);
      const cb = unchecked(plan.bw[ib]) + bb * unchecked(plan.pw[ib]);
      p.index = cb < ca ? ib : ia;
      p.eligible = m;
      p.considered = 2;
      if (plan.hasStaticSkips) for (let r = 1; r < SKIP_REASONS; r++) unchecked(plan.skipped[r] += unchecked(plan.staticSkipped[r]));
      return p;
    }
  }
  // Full scan (band picker; p2c when a drawn candidate is saturated or some data may be stale).
  // Raw pointers into the flat arrays: this loop runs over every instance.
  const skipP = changetype<usize>(plan.skip);
  const slotP = changetype<usize>(plan.slot);
  const staleP = changetype<usize>(plan.staleAtMs);
  const bwP = changetype<usize>(plan.bw);
  const pwP = changetype<usize>(plan.pw);
  const qP = changetype<usize>(plan.qAdj);
  const satP = changetype<usize>(plan.satAt);
  const costP = changetype<usize>(plan.cost);
  const anyStale = nowMs >= plan.minStaleAtMs;
  let best = Infinity;
  let eligible = 0;
  let saturated = 0;
  for (let i = 0; i < n; i++) {
    const o4 = <usize>i << 2;
    const o8 = <usize>i << 3;
    let skip = load<i32>(skipP + o4);
    if (anyStale && skip == SKIP_NONE && nowMs >= load<f64>(staleP + o8)) skip = SKIP_STALE;
    if (skip != SKIP_NONE) {
      unchecked(plan.skipped[skip]++);
      store<f64>(costP + o8, Infinity);
      continue;
    }
    let b = load<f64>(qP + o8) + <f64>load<i32>(inflightP + (<usize>load<i32>(slotP + o4) << 2));
    if (b < 0) b = 0;
    const c = load<f64>(bwP + o8) + b * load<f64>(pwP + o8);
    store<f64>(costP + o8, c);
    eligible++;
    if (c < best) best = c;
    if (b >= load<f64>(satP + o8)) saturated++;
  }
  if (saturated > 0) {
    // Rare path. Every eligible instance saturated: none is (the all-ineligible policy applies).
    // Or a non-saturated one has a free slot now: leave the saturated ones out. Otherwise keep them.
    let freeNonSat = 0;
    if (saturated < eligible) {
      for (let i = 0; i < n; i++) {
        const o8 = <usize>i << 3;
        if (load<f64>(costP + o8) == Infinity) continue;
        // not hot (satAt +Inf), and a slot free
        if (load<f64>(satP + o8) == Infinity && backlogAt(plan, inflightP, i) < unchecked(plan.slots[i])) freeNonSat++;
      }
    }
    if (saturated == eligible || freeNonSat > 0) {
      best = Infinity;
      for (let i = 0; i < n; i++) {
        const o8 = <usize>i << 3;
        const c = load<f64>(costP + o8);
        if (c == Infinity) continue;
        if (backlogAt(plan, inflightP, i) >= load<f64>(satP + o8)) {
          store<f64>(costP + o8, Infinity);
        } else if (c < best) best = c;
      }
      unchecked(plan.skipped[SKIP_SATURATED] += saturated);
      eligible -= saturated;
    }
  }
  p.eligible = eligible;
  if (eligible == 0) return p;
  if (picker == PICKER_P2C) {
    if (eligible == 1) { p.index = nthEligible(costP, n, 0); p.considered = 1; return p; }
    let ia: i32, ib: i32;
    if (eligible == n) {
      ia = <i32>(rng.next() * <f64>n) % n;
      ib = <i32>(rng.next() * <f64>(n - 1)) % (n - 1);
      if (ib >= ia) ib++;
    } else {
      const a = <i32>(rng.next() * <f64>eligible) % eligible;
      let bk = <i32>(rng.next() * <f64>(eligible - 1)) % (eligible - 1);
      if (bk >= a) bk++;
      ia = nthEligible(costP, n, a);
      ib = nthEligible(costP, n, bk);
    }
    p.index = load<f64>(costP + (<usize>ib << 3)) < load<f64>(costP + (<usize>ia << 3)) ? ib : ia;
    p.considered = 2;
    return p;
  }
  const limit = best * (1 + band);
  let inBand = 0;
  for (let i = 0; i < n; i++) if (load<f64>(costP + (<usize>i << 3)) <= limit) inBand++;
  p.considered = inBand;
  let k = <i32>(rng.next() * <f64>inBand);
  if (k >= inBand) k = inBand - 1;
  for (let i = 0; i < n; i++) {
    if (load<f64>(costP + (<usize>i << 3)) <= limit) {
      if (k == 0) { p.index = i; return p; }
      k--;
    }
  }
  return p;
}
