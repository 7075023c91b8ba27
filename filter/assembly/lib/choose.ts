// Load-aware instance choice (pure). Follows the Gateway API Inference Extension scheduler's
// shape: filters (eligibility) → scorer (expected wait) → picker (near-best band).
//
// Expected wait per instance, in ms:
//   W = rho·E[S²] / (2(1 − rho)) + E[S]            M/G/1 (Pollaczek–Khinchine) prior from the agent
//     + max(0, q + n_now − n_snap) · E[S] / c       backlog term
//     + RTT                                          the link's round trip, for instances in another cloud
// q is the queue the agent saw (waiting + running) when it scraped; n_now − n_snap is what this
// proxy has added (or drained) since that snapshot — our own in-flight requests, counted across
// all worker VMs. That term is what stops herding: every request we send makes the instance look
// busier at once, instead of a second later at the next scrape. c is the instance's slot count.
// A de-weighted instance (score in [0.5, 0.8)) has its cost divided by its weight (the score).
import { InstanceState } from "./snapshot";

export const SKIP_NONE: i32 = 0;
export const SKIP_UNHEALTHY: i32 = 1;
export const SKIP_SATURATED: i32 = 2;
export const SKIP_SLOW: i32 = 3;
export const SKIP_STALE: i32 = 4;
export const SKIP_LINK: i32 = 5;
export const SKIP_REASONS: i32 = 6;

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

/** M/G/1 expected time in system (ms); +Inf at or beyond saturation. */
export function mg1WaitMs(rho: f64, esMs: f64, es2Ms2: f64): f64 {
  if (!(rho < 1)) return Infinity;
  const r = rho > 0 ? rho : 0;
  const es = esMs > 0 ? esMs : 0;
  const es2 = es2Ms2 > es * es ? es2Ms2 : es * es; // E[S²] >= E[S]² always
  return r * es2 / (2 * (1 - r)) + es;
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
  baseWaitMs: f64 = 0;
  perItemMs: f64 = 0;
  queue: f64 = 0;
  rho: f64 = 0;
  weight: f64 = 1;
  skip: i32 = SKIP_NONE;
  /** Absolute time (ms) from which this instance's data is too old. */
  staleAtMs: f64 = 0;
  /** In-flight slot (see Inflight) and our in-flight count when the snapshot was adopted. */
  slot: i32 = 0;
  inflightAtSnapshot: i32 = 0;
  /** Metric id of this instance's choice counter (set by the glue). */
  metricId: u32 = 0;
}

/**
 * Static, per-snapshot eligibility and cost parts of one instance. linkRttMs is the measured round
 * trip to the instance's cloud (0 for local instances): a remote instance must be that much faster.
 */
export function candidateFrom(s: InstanceState, maxUtilization: f64, stalenessMs: f64, generatedAtMs: f64, linkDegraded: bool,
  linkRttMs: f64 = 0): Candidate {
  const c = new Candidate();
  c.addr = s.addr;
  c.addrBytes = String.UTF8.encode(s.addr);
  c.peer = s.peer;
  c.rho = <f64>s.rho;
  c.baseWaitMs = mg1WaitMs(c.rho, <f64>s.esMs, <f64>s.es2Ms2) + (linkRttMs > 0 ? linkRttMs : 0);
  const slots = s.slots >= 1 ? <f64>s.slots : 1;
  c.perItemMs = (s.esMs > 0 ? <f64>s.esMs : 0) / slots;
  c.queue = s.queueDepth > 0 ? <f64>s.queueDepth : 0;
  c.weight = weightFor(healthScore(<f64>s.p99Ms, <f64>s.baselineP99Ms));
  c.staleAtMs = generatedAtMs + stalenessMs - <f64>s.dataAgeMs;
  if (!s.healthy) c.skip = SKIP_UNHEALTHY;
  else if (linkDegraded) c.skip = SKIP_LINK;
  // Compare in f32, the snapshot's precision: 0.95 on the wire is 0.949999988 as f64.
  else if (!(s.rho < <f32>maxUtilization)) c.skip = SKIP_SATURATED;
  else if (c.weight == 0) c.skip = SKIP_SLOW;
  return c;
}

/** Cost of sending the next request to c, given our in-flight count now. */
export function costMs(c: Candidate, inflightNow: i32): f64 {
  let backlog = c.queue + <f64>(inflightNow - c.inflightAtSnapshot);
  if (backlog < 0) backlog = 0;
  return (c.baseWaitMs + backlog * c.perItemMs) / c.weight;
}

export class Pick {
  index: i32 = -1;
  /** Eligible candidates considered. */
  eligible: i32 = 0;
  /** Candidates inside the near-best band. */
  band: i32 = 0;
}

/**
 * One service's candidates laid out as flat arrays (struct of arrays): the per-request scan reads
 * contiguous memory instead of chasing one object per instance. Built once per snapshot version,
 * with the per-snapshot parts of the cost folded in:
 *   cost_i = W_i / weight_i = bw_i + max(0, qAdj_i + n_i) · pw_i
 * with bw = baseWait/weight, pw = (E[S]/c)/weight, qAdj = q − n_snap, n_i our in-flight count now.
 */
export class Plan {
  n: i32;
  addr: Array<string>;
  addrBytes: Array<ArrayBuffer>;
  metricId: StaticArray<u32>;
  /** Static skip reason (SKIP_NONE if eligible apart from staleness). */
  skip: StaticArray<i32>;
  slot: StaticArray<i32>;
  staleAtMs: StaticArray<f64>;
  bw: StaticArray<f64>;
  pw: StaticArray<f64>;
  qAdj: StaticArray<f64>;
  // kept for the debug header
  baseWaitMs: StaticArray<f64>;
  perItemMs: StaticArray<f64>;
  rho: StaticArray<f64>;
  /** Scratch: cost of each candidate for the current pick. */
  cost: StaticArray<f64>;
  /** Choices and skips made since the last flush to host metrics (one host call per tick, not per request). */
  chosen: StaticArray<i64>;
  skipped: StaticArray<i64>;

  constructor(cands: Array<Candidate>) {
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
    this.baseWaitMs = new StaticArray<f64>(n);
    this.perItemMs = new StaticArray<f64>(n);
    this.rho = new StaticArray<f64>(n);
    this.cost = new StaticArray<f64>(n);
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
      this.baseWaitMs[i] = c.baseWaitMs;
      this.perItemMs[i] = c.perItemMs;
      this.rho[i] = c.rho;
    }
  }

  /** Expected wait (ms, before de-weighting) of candidate i given our in-flight count now. */
  waitMs(i: i32, inflightNow: i32): f64 {
    let backlog = this.qAdj[i] + <f64>inflightNow;
    if (backlog < 0) backlog = 0;
    return this.baseWaitMs[i] + backlog * this.perItemMs[i];
  }
}

/**
 * Picks among candidates whose cost is within (1 + band) of the best, uniformly at random
 * (rand in [0, 1)). Skips are counted in plan.skipped. `inflight` is indexed by plan.slot.
 */
export function pick(plan: Plan, inflight: Array<i32>, nowMs: f64, band: f64, rand: f64): Pick {
  const p = new Pick();
  const n = plan.n;
  // Raw pointers into the flat arrays: this loop runs once per request over every instance.
  const skipP = changetype<usize>(plan.skip);
  const slotP = changetype<usize>(plan.slot);
  const staleP = changetype<usize>(plan.staleAtMs);
  const bwP = changetype<usize>(plan.bw);
  const pwP = changetype<usize>(plan.pw);
  const qP = changetype<usize>(plan.qAdj);
  const costP = changetype<usize>(plan.cost);
  const inflightP = inflight.dataStart;
  let best = Infinity;
  let eligible = 0;
  for (let i = 0; i < n; i++) {
    const o4 = <usize>i << 2;
    const o8 = <usize>i << 3;
    let skip = load<i32>(skipP + o4);
    if (skip == SKIP_NONE && nowMs >= load<f64>(staleP + o8)) skip = SKIP_STALE;
    if (skip != SKIP_NONE) {
      unchecked(plan.skipped[skip]++);
      store<f64>(costP + o8, Infinity);
      continue;
    }
    let backlog = load<f64>(qP + o8) + <f64>load<i32>(inflightP + (<usize>load<i32>(slotP + o4) << 2));
    if (backlog < 0) backlog = 0;
    const c = load<f64>(bwP + o8) + backlog * load<f64>(pwP + o8);
    store<f64>(costP + o8, c);
    eligible++;
    if (c < best) best = c;
  }
  p.eligible = eligible;
  if (eligible == 0 || best == Infinity) return p;
  const limit = best * (1 + band);
  let inBand = 0;
  for (let i = 0; i < n; i++) if (load<f64>(costP + (<usize>i << 3)) <= limit) inBand++;
  p.band = inBand;
  let k = <i32>(rand * <f64>inBand);
  if (k >= inBand) k = inBand - 1;
  for (let i = 0; i < n; i++) {
    if (load<f64>(costP + (<usize>i << 3)) <= limit) {
      if (k == 0) { p.index = i; return p; }
      k--;
    }
  }
  return p;
}
