// Load-aware instance choice (pure). Follows the Gateway API Inference Extension scheduler's
// shape: filters (eligibility) → scorer (expected wait) → picker (near-best band).
//
// Expected wait per instance, in ms:
//   W = rho·E[S²] / (2(1 − rho)) + E[S]            M/G/1 (Pollaczek–Khinchine) prior from the agent
//     + max(0, q + n_now − n_snap) · E[S] / c       backlog term
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
  /** Last computed values, for the debug header. */
  lastWaitMs: f64 = 0;
  /** Metric id of this instance's choice counter (set by the glue). */
  metricId: u32 = 0;
}

/** Static, per-snapshot eligibility and cost parts of one instance. */
export function candidateFrom(s: InstanceState, maxUtilization: f64, stalenessMs: f64, generatedAtMs: f64, linkDegraded: bool): Candidate {
  const c = new Candidate();
  c.addr = s.addr;
  c.addrBytes = String.UTF8.encode(s.addr);
  c.peer = s.peer;
  c.rho = <f64>s.rho;
  c.baseWaitMs = mg1WaitMs(c.rho, <f64>s.esMs, <f64>s.es2Ms2);
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
  const w = c.baseWaitMs + backlog * c.perItemMs;
  c.lastWaitMs = w;
  return w / c.weight;
}

export class Pick {
  index: i32 = -1;
  /** Eligible candidates considered. */
  eligible: i32 = 0;
  /** Candidates inside the near-best band. */
  band: i32 = 0;
}

/**
 * Picks among candidates whose cost is within (1 + band) of the best, uniformly at random
 * (rand in [0, 1)). skipCounts (length SKIP_REASONS) accumulates why others were left out.
 */
export function pick(cands: Array<Candidate>, inflight: Array<i32>, nowMs: f64, band: f64, rand: f64,
  skipCounts: StaticArray<i32>, costs: StaticArray<f64>): Pick {
  const p = new Pick();
  let best = Infinity;
  const n = cands.length;
  for (let i = 0; i < n; i++) {
    const c = unchecked(cands[i]);
    let skip = c.skip;
    if (skip == SKIP_NONE && nowMs >= c.staleAtMs) skip = SKIP_STALE;
    if (skip != SKIP_NONE) {
      unchecked(skipCounts[skip]++);
      unchecked(costs[i] = Infinity);
      continue;
    }
    const cost = costMs(c, unchecked(inflight[c.slot]));
    unchecked(costs[i] = cost);
    p.eligible++;
    if (cost < best) best = cost;
  }
  if (p.eligible == 0 || best == Infinity) return p;
  const limit = best * (1 + band);
  for (let i = 0; i < n; i++) if (unchecked(costs[i]) <= limit) p.band++;
  let k = <i32>Math.floor(rand * <f64>p.band);
  if (k >= p.band) k = p.band - 1;
  for (let i = 0; i < n; i++) {
    if (unchecked(costs[i]) <= limit) {
      if (k == 0) { p.index = i; return p; }
      k--;
    }
  }
  return p;
}
