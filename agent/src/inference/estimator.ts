// Per-instance load estimator: M/G/1 (M/G/c) inputs from the deltas of cumulative
// counters and histograms between scrapes, over a sliding window.
//
// ---------------------------------------------------------------- what is estimated, how
//
// Inputs per scrape (mappings.ts, all in ms): cumulative completion count N(t), cumulative
// service-time sum Σ(t), cumulative service-time histogram buckets B_i(t), the latency
// (e2e) histogram, and the gauges waiting/running/gpuUtil.
//
// Interval deltas. For consecutive scrapes (t0, t1) the estimator keeps dN, dΣ and the
// per-bucket count deltas. A COUNTER RESET (server restart: any cumulative value smaller
// than before) is handled as Prometheus' rate() does: the new cumulative values are taken
// as the increase over that interval (everything counted since the restart). A histogram
// whose bucket layout changed starts over (that interval contributes nothing).
//
// Window (default 10 s): the sum of the deltas of the intervals ending in (now - window, now],
// T = covered time (end of the last interval - start of the first).
//
//   λ  (lambdaPerS) = (ΣdN + ΔQ) / T,  ΔQ = in-system(last) - in-system(first), in-system =
//      waiting + running. Completions alone are DEPARTURES: they lag arrivals by the sojourn
//      time and can never exceed the capacity, so under overload the departure rate
//      under-estimates the arrival rate exactly by the queue growth rate; adding ΔQ/T (flow
//      conservation, arrivals = departures + growth of the population) removes that bias
//      whenever the server exports its queue gauges. The correction's noise is ±1/T per request
//      of ΔQ, so it is applied once T >= min(window/2, 2 s) (at start-up λ = departures).
//      Without queue gauges λ = ΣdN/T (biased low while the queue grows, lagging ~E[sojourn]).
//   E[S] = ΣdΣ / ΣdN  -- exact for the window (sum and count are exact counters). When the window
//      holds fewer than minMomentCompletions (default 50) completions, older intervals are added,
//      newest first, until it does (or the history runs out): E[S] and E[S²] always rest on
//      enough requests. A heavy-tailed mean from 1-2 requests can be 10x off, and an instance
//      priced 10x too slow gets no traffic, so nothing would correct it (docs/agent-design.md).
//   E[S²] from the service-histogram bucket deltas, see secondMomentFromBuckets() below;
//      servers without a histogram (Triton) get E[S²] = (1 + scv)·E[S]² with the configured
//      squared coefficient of variation (default 1: exponential service).
//   P50/P99: Prometheus histogram_quantile() semantics on the window's latency-bucket deltas
//      (linear interpolation inside the bucket, lower edge 0 for the first bucket, a quantile
//      in the +Inf bucket returns the highest finite bound); servers without a latency
//      histogram fall back to a summary's quantile="0.5"/"0.99", else NaN.
//   queueDepth = waiting + running at the last scrape (the filter's backlog term counts every
//      request ahead of a new one, at E[S]/c each); servers without a running gauge (Triton)
//      report only the pending count. A page with NEITHER gauge (a Triton ensemble without
//      nv_inference_pending_request_count, a custom mapping of counters only): the queue is
//      unknown, and it is never published as NaN (the snapshot rules would make the instance
//      invalid_data, never routable) nor as 0 (unknown would then look idle, cheaper than a
//      peer with a known queue). It stands in by Little's law from the instance's own counters,
//      L = λ·(E[S] + E[Wq]) / 1000 over the window (E[Wq] from a queue-time sum when exported,
//      e.g. nv_inference_queue_duration_us; else 0: the mean number in service), queueSource
//      'little'; the collector then raises it to the largest known queue of the service's
//      instances (docs/contracts.md, "Queue unknown").
//   No absorbing state: each completion of an older interval (outside the window) counts with
//      weight w = exp(-age/τ) for itself and 1 - w for a PRIOR (option `prior`; the collector gives
//      the median E[S]/E[S²] of the service's other instances with completions in their window),
//      age = how long the interval has been out of the window, τ = the window length. An instance
//      priced out by a slow episode receives no request, so without this its E[S] would stay at
//      the episode's value for good; with it, E[S] moves to the prior within a few τ (e^-3 = 5 %
//      of the gap left after 3τ = 30 s by default) and fresh completions then judge it again. The
//      number of completions the moments rest on is unchanged (minMomentCompletions), so a single
//      slow request still cannot dominate. Without a finite prior (one instance, or all idle) the
//      weights stay 1. P50 and P99 of a window without completions are unknown (NaN): a P99 of
//      requests that left the window says nothing about the instance now.
//   Broken exporters: a NaN, infinite or negative load gauge or counter, a service-time sum that
//      does not grow while requests complete, or a counter that goes backwards more than once
//      within the window (one reset = a restart, handled as above; repeated drops = not a
//      counter) make the scrape INVALID: it is not used, the last good values are kept, and
//      `invalid` carries the reason (the instance is published unhealthy, reason parse_error).
//   ρ: c = the configured concurrency, else the slot count the server exports (mapping `slots`),
//      else inferred: the largest `running` seen while `waiting` > 0 on two consecutive scrapes
//      (the smaller running count of the two: the queue outlived the steps between them, so the
//      slots were full; one scrape's queue may be a request waiting for the next step), unless more than that ever ran without a queue; else the largest
//      `running` seen plus a margin of max(1, ⌈25 %⌉) -- a server that never queued has at least
//      one free slot, and taking the bare maximum marked healthy instances saturated (their ρ
//      inflated and backlog >= slots); else 1. The inference restarts at a counter reset (a
//      restarted server may have a new slot count).
//        ρ_load = λ·E[S]/(1000·c)                         (offered load per slot)
//        ρ_occ  = mean(running)/c over the window's scrapes (used only when E[S] is unknown)
//        ρ_gpu  = GPU utilisation 0..1 when exported
//      rhoCombine 'max' (default): ρ = max of the available ones -- each one alone can miss
//      saturation (λ·E[S] lags, GPU util misses queueing in front of the GPU), and taking the
//      max errs on the side of skipping a hot instance. Caveat: NVIDIA's "utilisation" is the
//      fraction of time ANY kernel runs, which reads ~100 % for a batching LLM server with a
//      single request; choose rhoCombine 'load' for such fleets. 'gpu' uses GPU util alone
//      (falls back to load when absent).
import type { Hist, Signals } from './mappings';

/**
 * Steps of at least QUEUE_GROWTH_STEP_MS over which `waiting` must rise, each step, for
 * queueGrowing: 2 (2 s of growth; a burst that lands within one step rises once, then drains; 3
 * steps entered too late under a 2x overload: critical TTFT P99 388 -> 1790 ms in the quick bench).
 * Measured in time, not in scrapes: counted per scrape, a 250 ms scrape turned 0.5 s of queue
 * noise at 0.6 of capacity into an overload episode (7 standard requests refused).
 */
export const QUEUE_GROWTH_SCRAPES = 2;
/** The length of one growth step: the default scrape interval, so that at 1 s one step is one scrape. */
export const QUEUE_GROWTH_STEP_MS = 1000;
/** Bound on the (time, waiting) history kept for the growth test (a 16 ms scrape still covers 2 s). */
const WAITING_HISTORY = 128;

// ---------------------------------------------------------------- pure helpers

/**
 * Prometheus histogram_quantile() on non-cumulative bucket counts.
 * `bounds`: finite upper bounds ascending; `counts`: per-bucket counts, length bounds.length+1.
 */
export function histQuantile(bounds: number[], counts: number[], q: number): number {
  const total = counts.reduce((a, b) => a + b, 0);
  if (!(total > 0)) return NaN;
  const rank = q * total;
  let cum = 0;
  for (let i = 0; i < counts.length; i++) {
    const prev = cum;
    cum += counts[i];
    if (cum >= rank && counts[i] > 0) {
      if (i === bounds.length) return bounds.length > 0 ? bounds[bounds.length - 1] : NaN;
      const lo = i === 0 ? Math.min(0, bounds[0]) : bounds[i - 1];
      const hi = bounds[i];
      return lo + ((hi - lo) * (rank - prev)) / counts[i];
    }
  }
  return bounds.length > 0 ? bounds[bounds.length - 1] : NaN;
}

export type Es2Method = 'buckets' | 'assumed-scv' | 'none';

export interface SecondMoment {
  es2: number;
  method: Es2Method;
  /**
   * Worst-case absolute error of the finite buckets' contribution (any distribution):
   * Σ p_i·w_i·(2u_i + l_i)/3. The open bucket's error is not bounded (model-dependent).
   */
  errBound: number;
}

/**
 * E[S²] from histogram bucket counts (non-cumulative) and the exact sum.
 *
 * Finite bucket i = (l_i, u_i] (l_0 = 0), share p_i = n_i/N, midpoint m_i, width w_i.
 * Zeroth-order model: uniform density inside the bucket, whose second moment is exactly
 * (l² + l·u + u²)/3 = m² + w²/12, i.e. E[S²] ≈ Σ p_i·(m_i² + w_i²/12) + p_∞·E[S²|open].
 * Used here: the first-order refinement -- a LINEAR density n_i/w_i + b_i·(x - m_i) whose
 * edge values are the width-weighted averages of the neighbouring bucket densities (slope
 * clamped so the density stays >= 0). It adds b_i·m_i·w_i³/6 to the bucket's Σx² and
 * b_i·w_i³/12 to its Σx. On geometric ladders the uniform model is biased high by a constant
 * factor (the density falls inside the wide upper buckets that dominate E[S²]): +8.5 % at
 * ratio 1.5 (TGI's ladder), +2.5 % at 1.25; the linear model brings that to within ±1 %
 * (measured against exact bucket masses of exponential, lognormal and bounded-Pareto
 * service times, test/inference/estimator.test.ts).
 *
 * Open bucket (L, +Inf): the tail is modelled as L + Exp(θ), second moment m_∞² + θ² with
 * m_∞ = L + θ. θ = n_∞ / f(L), f(L) = density of the last finite bucket (a continuous
 * density at L); when that bucket is empty (a detached tail, e.g. timeouts), the mean is
 * recovered from the exact sum, m_∞ = (sum - Σ n_i·m_i)/n_∞, floored at L + w_last/2 and
 * capped at (sum - Σ n_i·l_i)/n_∞ (the largest value consistent with the finite buckets).
 *
 * Error bound. Whatever the true distribution inside bucket i, its conditional second
 * moment lies in [l², u²], so the per-bucket error is at most
 *   max(u² - (l²+lu+u²)/3, (l²+lu+u²)/3 - l²) = w·(2u + l)/3
 * (the first term is the larger), and |E[S²]_est - E[S²]| ≤ Σ p_i·w_i·(2u_i + l_i)/3 over the
 * finite buckets (+ the open bucket's model error). For geometric buckets of ratio r the
 * relative worst case is (r-1)(2r+1)/3 (r = 1.5: 67 %). The bound still holds for the linear
 * model (any non-negative density on (l, u] has E[X²|bucket] in [l², u²]); it is reported
 * (es2ErrBoundMs2) but is far from the typical error for densities that are smooth on the
 * bucket scale, which is second order in w (see the figures above; the irregular vLLM ladder
 * with its (0.1, 0.25] s bucket: +8..30 % for sub-second services).
 *
 * Resolution guard. If one finite bucket holds ≥ 80 % of the mass the histogram cannot see
 * the shape (e.g. 80 ms requests all in vLLM's first e2e bucket (0, 0.3 s]: the uniform
 * assumption would say E[S²] = 0.03 s² whatever E[S] is). Then E[S²] = (1 + scv)·E[S]² with
 * the configured scv, clamped to what the buckets still allow: [max(E[S]², Σp_i l_i²),
 * Σp_i u_i²] (upper bound only when the open bucket is empty). Every estimate is finally
 * clamped to ≥ E[S]² (Jensen).
 */
export function secondMomentFromBuckets(bounds: number[], counts: number[], sum: number, assumedScv = 1): SecondMoment {
  const N = counts.reduce((a, b) => a + b, 0);
  if (!(N > 0)) return { es2: NaN, method: 'none', errBound: NaN };
  const mean = sum / N;
  const k = bounds.length;
  const lo = (i: number): number => (i === 0 ? Math.min(0, bounds[0]) : bounds[i - 1]);
  const wid = (i: number): number => bounds[i] - lo(i);
  const dens = (i: number): number => (wid(i) > 0 ? (counts[i] || 0) / wid(i) : 0);
  let acc = 0;
  let midSum = 0;
  let errBound = 0;
  let lo2 = 0;
  let hi2 = 0;
  let lo1 = 0;
  let pMax = 0;
  for (let i = 0; i < k; i++) {
    const n = counts[i];
    if (!(n > 0)) continue;
    const l = lo(i);
    const u = bounds[i];
    const w = u - l;
    const m = (l + u) / 2;
    // linear density n/w + b·(x - m): edge densities are the width-weighted averages with the
    // neighbours' densities, slope clamped so the density stays >= 0 on the bucket
    const d = n / w;
    const fl = i === 0 ? d : (dens(i - 1) * wid(i - 1) + n) / (wid(i - 1) + w);
    const fr = i + 1 < k ? (dens(i + 1) * wid(i + 1) + n) / (wid(i + 1) + w) : d;
    const lim = (2 * d) / w;
    const b = w > 0 ? Math.max(-lim, Math.min(lim, (fr - fl) / w)) : 0;
    acc += n * (m * m + (w * w) / 12) + (b * m * w * w * w) / 6;
    midSum += n * m + (b * w * w * w) / 12;
    errBound += (n * w * (2 * u + l)) / 3;
    lo2 += n * l * l;
    hi2 += n * u * u;
    lo1 += n * l;
    pMax = Math.max(pMax, n / N);
  }
  const nInf = counts[bounds.length] ?? 0;
  if (nInf > 0) {
    const L = bounds.length > 0 ? bounds[bounds.length - 1] : 0;
    const wLast = bounds.length > 1 ? L - bounds[bounds.length - 2] : L;
    // tail L + Exp(θ). θ from the density just below L (continuity of the density:
    // f(L) = n_∞/θ) when the last finite bucket has mass; else from the sum's residual,
    // limited to the range consistent with the finite buckets ([Σn·l, Σn·u] holds their sum)
    const fL = k > 0 ? dens(k - 1) : 0;
    let mInf: number;
    if (fL > 0) mInf = L + nInf / fL;
    else {
      const mMax = (sum - lo1) / nInf;
      mInf = Math.min(Math.max(L + wLast / 2, (sum - midSum) / nInf), Math.max(L + wLast / 2, mMax));
    }
    acc += nInf * (mInf * mInf + (mInf - L) * (mInf - L));
    lo2 += nInf * L * L;
    hi2 = Infinity;
  }
  const floor = Math.max(mean * mean, lo2 / N);
  if (pMax >= 0.8) {
    const assumed = (1 + assumedScv) * mean * mean;
    return { es2: Math.min(Math.max(assumed, floor), hi2 / N), method: 'assumed-scv', errBound: errBound / N };
  }
  return { es2: Math.max(acc / N, mean * mean), method: 'buckets', errBound: errBound / N };
}

/** Median of the samples after removing the top `trim` fraction (floor(n·trim) largest). */
export function trimmedMedian(values: number[], trim = 0.1): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const keep = v.slice(0, v.length - Math.floor(v.length * trim));
  const n = keep.length;
  return n % 2 === 1 ? keep[(n - 1) / 2] : (keep[n / 2 - 1] + keep[n / 2]) / 2;
}

/**
 * Dynamic latency baseline: P99 samples (one per scrape) over the last `windowMs`
 * (default 5 min); value = median after trimming the top 10 %. NaN until `minSamples`.
 */
export class BaselineTracker {
  private samples: Array<{ t: number; v: number }> = [];
  constructor(
    public windowMs = 300_000,
    public trim = 0.1,
    public minSamples = 5,
  ) {}
  add(t: number, v: number): void {
    if (!Number.isFinite(v)) return;
    this.samples.push({ t, v });
    this.prune(t);
  }
  private prune(now: number): void {
    let k = 0;
    while (k < this.samples.length && this.samples[k].t <= now - this.windowMs) k++;
    if (k > 0) this.samples.splice(0, k);
  }
  private cache?: { at: number; v: number };
  /**
   * Large pools (a service-wide baseline: instances x 300 scrapes) are re-sorted at most once
   * per second; the baseline moves on a minutes scale.
   */
  value(now: number): number {
    if (this.cache && this.samples.length > 1000 && now - this.cache.at < 1000 && now >= this.cache.at) return this.cache.v;
    this.prune(now);
    if (this.samples.length < this.minSamples) return NaN;
    const v = trimmedMedian(
      this.samples.map((s) => s.v),
      this.trim,
    );
    this.cache = { at: now, v };
    return v;
  }
  get size(): number {
    return this.samples.length;
  }
}

/**
 * Health score: 1 if p99 <= k·baseline, else k·baseline/p99, in [0, 1]; 1 when either is
 * unknown. The filter: >= 0.8 full weight, 0.5..0.8 weight = score, < 0.5 excluded.
 */
export function healthScore(p99: number, baseline: number, k = 3): number {
  if (!Number.isFinite(p99) || !Number.isFinite(baseline) || baseline <= 0 || p99 <= 0) return 1;
  if (p99 <= k * baseline) return 1;
  return Math.max(0, Math.min(1, (k * baseline) / p99));
}

// ---------------------------------------------------------------- the estimator

export interface EstimatorOptions {
  windowMs?: number;
  /** slots (batch size / concurrency); inferred when absent */
  concurrency?: number;
  /** squared coefficient of variation assumed when the buckets cannot give E[S²] */
  assumedScv?: number;
  rhoCombine?: 'max' | 'load' | 'gpu';
  /** baseline window for the per-instance baseline (ms) */
  baselineWindowMs?: number;
  /** fraction of the highest P99 samples the per-instance baseline drops (default 0.1) */
  baselineTrim?: number;
  /** E[S] (ms) and E[S²] (ms²) that older completions fade toward (see "No absorbing state") */
  prior?: () => { es: number; es2: number };
  /** E[S] and E[S²] cover at least this many completions, reaching back before the window (default 50) */
  minMomentCompletions?: number;
}

export type SlotsSource = 'configured' | 'exporter' | 'inferred';

interface HistDelta {
  boundsMs: number[];
  counts: number[];
  sumMs: number;
  count: number;
}

interface IntervalDelta {
  t0: number;
  t1: number;
  dN?: number;
  dSumMs?: number;
  /** queueing-time delta (ms), when the server exports a queue-time sum */
  dQueueMs?: number;
  service?: HistDelta;
  latency?: HistDelta;
  inSys0?: number;
  inSys1?: number;
  reset: boolean;
}

interface Obs {
  t: number;
  s: Signals;
}

export interface EstimatorState {
  lambdaPerS: number;
  /** departures only (completions/s), for comparison with the corrected λ */
  departuresPerS: number;
  esMs: number;
  es2Ms2: number;
  es2Method: Es2Method;
  es2ErrBoundMs2: number;
  p50Ms: number;
  p99Ms: number;
  rho: number;
  rhoLoad: number;
  rhoOcc: number;
  gpuUtil: number;
  concurrency: number;
  concurrencySource: 'configured' | 'exporter' | 'inferred-saturated' | 'inferred-max-running' | 'default';
  /** what the snapshot says about `slots` (decision D2) */
  slotsSource: SlotsSource;
  /** `concurrency` is a floor, not a capacity: no batch seen yet, or none while the server queued (snapshot flag slotsFloor) */
  slotsFloor: boolean;
  /** the server's waiting count rose at each of the last QUEUE_GROWTH_SCRAPES scrapes (snapshot flag queueGrowing) */
  queueGrowing: boolean;
  /** why the last scrape was rejected (broken exporter data); undefined when it was used */
  invalid?: string;
  /** requests in the instance: waiting + running (waiting alone if running is not exported); Little's law when neither is (queueSource) */
  queueDepth: number;
  /** 'gauges': read from waiting/running; 'little': neither exported, λ·(E[S] + E[Wq]) stands in */
  queueSource: 'gauges' | 'little';
  waiting: number;
  running: number;
  kvCacheUsage: number;
  /** completions in the window */
  windowCompletions: number;
  /** covered time of the window (ms) */
  windowCoveredMs: number;
  counterResets: number;
  baselineP99Ms: number;
  /** time of the last observation (ms) */
  lastObservedAt: number;
}

function histDelta(prev: Hist | undefined, cur: Hist | undefined): { d?: HistDelta; reset: boolean } {
  if (!cur) return { reset: false };
  const toCounts = (cum: number[]): number[] => cum.map((c, i) => (i === 0 ? c : c - cum[i - 1]));
  if (!prev || prev.boundsMs.length !== cur.boundsMs.length || prev.boundsMs.some((b, i) => b !== cur.boundsMs[i])) {
    return { reset: false }; // first sight or new layout: baseline only
  }
  const dec = cur.count < prev.count || cur.sumMs < prev.sumMs - 1e-9 || cur.cumulative.some((c, i) => c < prev.cumulative[i]);
  if (dec) {
    return { d: { boundsMs: cur.boundsMs, counts: toCounts(cur.cumulative), sumMs: cur.sumMs, count: cur.count }, reset: true };
  }
  const dCum = cur.cumulative.map((c, i) => c - prev.cumulative[i]);
  return { d: { boundsMs: cur.boundsMs, counts: toCounts(dCum), sumMs: cur.sumMs - prev.sumMs, count: cur.count - prev.count }, reset: false };
}

function counterDelta(prev: number | undefined, cur: number | undefined): { d?: number; reset: boolean } {
  if (cur === undefined || prev === undefined) return { reset: false };
  if (cur < prev) return { d: cur, reset: true };
  return { d: cur - prev, reset: false };
}

/** Why a scrape's load data cannot be used, or undefined. Summary quantiles may be NaN (empty summary). */
export function invalidSignals(s: Signals): string | undefined {
  const bad = (v: number | undefined): boolean => v !== undefined && !(Number.isFinite(v) && v >= 0);
  const fields: Array<[string, number | undefined]> = [
    ['waiting', s.waiting],
    ['running', s.running],
    ['completions', s.completions],
    ['serviceSum', s.serviceSumMs],
  ];
  for (const [name, h] of [['serviceHistogram', s.serviceHist], ['latencyHistogram', s.latencyHist]] as const) {
    if (!h) continue;
    fields.push([`${name} count`, h.count], [`${name} sum`, h.sumMs]);
    const i = h.cumulative.findIndex((c) => !(Number.isFinite(c) && c >= 0));
    if (i >= 0) fields.push([`${name} bucket ${i}`, h.cumulative[i]]);
  }
  for (const [name, v] of fields) if (bad(v)) return `${name} is ${v} (must be a finite number >= 0)`;
  for (const [name, h] of [['serviceHistogram', s.serviceHist], ['latencyHistogram', s.latencyHist]] as const) {
    const why = h && inconsistentHistogram(h);
    if (why) return `${name} ${why}`;
  }
  return undefined;
}

/**
 * `_count` and the `+Inf` bucket count the same observations (issue 24 #6: an exporter whose
 * `_count` was 3x its `+Inf` bucket priced the instance 3x too cheap, E[S] = sum / count). They
 * may differ only by a scrape's race: a client library that updates the bucket and the count as
 * two steps (Python's prometheus_client derives `_count` from the +Inf bucket, Go's swaps a
 * consistent snapshot: both exact) can show the observations that complete between the two reads
 * of one page render, a handful out of the total. Tolerance: 1 % of the larger of the two, at
 * least 1 observation. Beyond it the histogram is broken and the scrape is rejected.
 */
export const HISTOGRAM_COUNT_TOLERANCE = 0.01;

export function inconsistentHistogram(h: { cumulative: number[]; count: number }): string | undefined {
  const inf = h.cumulative[h.cumulative.length - 1];
  if (inf === undefined || !Number.isFinite(inf) || !Number.isFinite(h.count)) return undefined; // invalidSignals' own checks
  const allowed = Math.max(1, HISTOGRAM_COUNT_TOLERANCE * Math.max(inf, h.count));
  if (Math.abs(h.count - inf) <= allowed) return undefined;
  return `_count ${h.count} differs from its +Inf bucket ${inf} by more than ${allowed} (1 % or 1): inconsistent histogram`;
}

const inSystem = (s: Signals): number | undefined => (s.waiting === undefined && s.running === undefined ? undefined : (s.waiting ?? 0) + (s.running ?? 0));

/** Sum of histogram deltas that share the first layout added (intervals of another layout are skipped). */
class HistSum {
  bounds?: number[];
  counts: number[] = [];
  sumMs = 0;
  add(h: HistDelta): void {
    if (!this.bounds) {
      this.bounds = h.boundsMs;
      this.counts = new Array(h.counts.length).fill(0);
    }
    if (!sameBounds(this.bounds, h.boundsMs)) return;
    h.counts.forEach((x, i) => (this.counts[i] += x));
    this.sumMs += h.sumMs;
  }
  nonEmpty(): boolean {
    return this.counts.some((x) => x > 0);
  }
}

export class InstanceEstimator {
  readonly windowMs: number;
  readonly assumedScv: number;
  readonly rhoCombine: 'max' | 'load' | 'gpu';
  readonly baseline: BaselineTracker;
  private configuredC?: number;
  private prev?: Obs;
  private deltas: IntervalDelta[] = [];
  /** Intervals with completions that left the window, newest last: just enough to cover minMomentCompletions. */
  private older: IntervalDelta[] = [];
  readonly minMomentCompletions: number;
  private obs: Obs[] = [];
  private resets = 0;
  private maxRunningSaturated = 0;
  private maxRunning = 0;
  /** (time, waiting) of the recent scrapes, oldest first (queueGrowing), bounded by WAITING_HISTORY */
  private waitingSeen: Array<[number, number]> = [];
  /** end times of the intervals in which a counter went backwards */
  private resetTimes: number[] = [];
  private invalid?: string;
  private lastKnown = { esMs: NaN, es2Ms2: NaN, es2Method: 'none' as Es2Method, es2ErrBoundMs2: NaN, p50Ms: NaN, p99Ms: NaN };

  constructor(opts: EstimatorOptions = {}) {
    this.windowMs = opts.windowMs ?? 10_000;
    this.assumedScv = opts.assumedScv ?? 1;
    this.rhoCombine = opts.rhoCombine ?? 'max';
    this.configuredC = opts.concurrency;
    this.baseline = new BaselineTracker(opts.baselineWindowMs ?? 300_000, opts.baselineTrim ?? 0.1);
    this.minMomentCompletions = opts.minMomentCompletions ?? 50;
    this.prior = opts.prior;
  }
  private readonly prior?: () => { es: number; es2: number };

  get counterResets(): number {
    return this.resets;
  }

  /** Feed one successful scrape taken at time t (ms). Returns the state after it. */
  observe(t: number, s: Signals): EstimatorState {
    if (this.prev && t <= this.prev.t) t = this.prev.t + 1e-3; // clock safety: strictly increasing
    this.invalid = invalidSignals(s);
    if (this.invalid) return this.rejected(t);
    if (this.prev) {
      const p = this.prev.s;
      const svc = histDelta(p.serviceHist, s.serviceHist);
      const lat = histDelta(p.latencyHist, s.latencyHist);
      const cnt = counterDelta(p.completions, s.completions);
      const sum = counterDelta(p.serviceSumMs, s.serviceSumMs);
      const qsum = counterDelta(p.queueSumMs, s.queueSumMs);
      const reset = svc.reset || lat.reset || cnt.reset || sum.reset;
      if (reset) {
        while (this.resetTimes.length > 0 && this.resetTimes[0] <= t - this.windowMs) this.resetTimes.shift();
        if (this.resetTimes.length > 0) {
          // a second drop within the window: not a restart but a broken counter; the interval is
          // not used, and the new values become the reference so a recovered exporter is judged afresh
          this.resetTimes.push(t);
          this.invalid = `a counter went backwards ${this.resetTimes.length} times within ${this.windowMs / 1000} s (not a restart)`;
          this.prev = { t, s };
          return this.rejected(t);
        }
        this.resetTimes.push(t);
        this.resets++;
        // a restarted server may have a new slot count
        this.maxRunning = 0;
        this.maxRunningSaturated = 0;
      }
      const d: IntervalDelta = { t0: this.prev.t, t1: t, reset, inSys0: inSystem(p), inSys1: inSystem(s) };
      if (svc.d) {
        d.service = svc.d;
        d.dN = svc.d.count;
        d.dSumMs = svc.d.sumMs;
      } else if (lat.d && s.serviceSumMs === undefined) {
        d.dN = lat.d.count;
        d.dSumMs = lat.d.sumMs;
      } else {
        if (sum.d !== undefined) d.dSumMs = sum.d;
        if (cnt.d !== undefined) d.dN = cnt.d;
      }
      if (qsum.d !== undefined && !qsum.reset) d.dQueueMs = qsum.d;
      if (d.dN === undefined && cnt.d !== undefined) d.dN = cnt.d;
      if (d.dN === undefined && lat.d) d.dN = lat.d.count;
      if (lat.d) d.latency = lat.d;
      else if (svc.d) d.latency = svc.d;
      this.deltas.push(d);
    }
    // Sustained excess, as the server itself shows it: its waiting count rose over each of the
    // last QUEUE_GROWTH_SCRAPES steps of QUEUE_GROWTH_STEP_MS. A burst that arrives at once raises
    // it once and then drains; an arrival rate above the service rate keeps raising it
    // (lib/overload.ts). A scrape without the gauge forgets the history (no evidence).
    if (s.waiting === undefined || !Number.isFinite(s.waiting)) this.waitingSeen.length = 0;
    else {
      this.waitingSeen.push([t, s.waiting]);
      const horizon = t - (QUEUE_GROWTH_SCRAPES + 1) * QUEUE_GROWTH_STEP_MS;
      while (this.waitingSeen.length > WAITING_HISTORY || (this.waitingSeen.length > 1 && this.waitingSeen[1][0] <= horizon)) this.waitingSeen.shift();
    }
    if (s.running !== undefined) {
      this.maxRunning = Math.max(this.maxRunning, s.running);
      // A capacity is what a queue persists at: a vLLM request waits from its arrival to the next
      // step's schedule whatever the free slots (and behind a full token budget for a step or
      // two), so one scrape that catches a request in that gap shows no capacity. A queue on two
      // consecutive scrapes outlived every step between them: the slots are at most the smaller
      // of the two running counts (llm-r7b.md: one such scrape priced a slot wait on idle workers).
      const pw = this.prev?.s.waiting ?? 0, pr = this.prev?.s.running;
      if ((s.waiting ?? 0) > 0 && pw > 0 && pr !== undefined) this.maxRunningSaturated = Math.max(this.maxRunningSaturated, Math.min(pr, s.running));
    }
    this.prev = { t, s };
    this.obs.push({ t, s });
    this.prune(t);
    const st = this.compute(t);
    if (Number.isFinite(st.p99Ms) && st.windowCompletions > 0) this.baseline.add(t, st.p99Ms);
    st.baselineP99Ms = this.baseline.value(t);
    return st;
  }

  private prune(now: number): void {
    const from = now - this.windowMs;
    while (this.deltas.length > 0 && this.deltas[0].t1 <= from) {
      const d = this.deltas.shift() as IntervalDelta;
      if ((d.dN ?? 0) > 0) this.older.push(d);
    }
    // keep the newest intervals that hold minMomentCompletions completions, no more
    let held = 0;
    for (const d of this.older) held += d.dN ?? 0;
    while (this.older.length > 1 && held - (this.older[0].dN ?? 0) >= this.minMomentCompletions) held -= this.older.shift()?.dN ?? 0;
    while (this.obs.length > 1 && this.obs[0].t <= from) this.obs.shift();
  }

  /** State as of the last observation (window anchored there). */
  state(): EstimatorState {
    const t = this.prev?.t ?? 0;
    const st = this.compute(t);
    st.baselineP99Ms = this.baseline.value(t);
    return st;
  }

  /** A rejected scrape: the estimates of the good scrapes so far, with the reason. */
  private rejected(t: number): EstimatorState {
    const reason = this.invalid;
    const st = this.compute(this.prev?.t ?? t);
    st.baselineP99Ms = this.baseline.value(t);
    this.invalid = reason;
    st.invalid = reason;
    return st;
  }

  private concurrency(): [number, EstimatorState['concurrencySource']] {
    if (this.configuredC && this.configuredC > 0) return [this.configuredC, 'configured'];
    const exported = this.prev?.s.slots;
    if (exported !== undefined && Number.isFinite(exported) && exported >= 1) return [Math.floor(exported), 'exporter'];
    if (this.maxRunningSaturated > 0 && this.maxRunningSaturated >= this.maxRunning) return [this.maxRunningSaturated, 'inferred-saturated'];
    if (this.maxRunning > 0) return [this.maxRunning + Math.max(1, Math.ceil(0.25 * this.maxRunning)), 'inferred-max-running'];
    return [1, 'default'];
  }

  private compute(now: number): EstimatorState {
    const ds = this.deltas;
    const last = this.prev?.s;
    const [c, cSrc] = this.concurrency();
    let N = 0;
    let S = 0;
    let haveN = false;
    let haveS = false;
    let Q = 0;
    let NQ = 0;
    const svc = new HistSum();
    const lat = new HistSum();
    // bucket layouts: aggregate the intervals that share the newest layout
    for (let k = ds.length - 1; k >= 0; k--) {
      const d = ds[k];
      if (d.dN !== undefined) {
        N += d.dN;
        haveN = true;
      }
      if (d.dSumMs !== undefined) {
        S += d.dSumMs;
        haveS = true;
      }
      if (d.service) svc.add(d.service);
      if (d.latency) lat.add(d.latency);
      if (d.dQueueMs !== undefined && d.dN !== undefined) {
        Q += d.dQueueMs;
        NQ += d.dN;
      }
    }
    const T = ds.length > 0 ? (ds[ds.length - 1].t1 - ds[0].t0) / 1000 : 0;
    const departures = haveN && T > 0 ? N / T : NaN;
    let lambda = departures;
    const q0 = ds.length > 0 ? ds[0].inSys0 : undefined;
    const q1 = ds.length > 0 ? ds[ds.length - 1].inSys1 : undefined;
    // the correction's noise is ~1/T per request of ΔQ: only once the window covers enough time
    const minT = Math.min(this.windowMs / 2, 2000) / 1000;
    if (Number.isFinite(departures) && q0 !== undefined && q1 !== undefined && T >= minT) lambda = Math.max(0, (N + (q1 - q0)) / T);

    // E[S], E[S²]: the window's completions, and older ones while fewer than minMomentCompletions.
    // A heavy-tailed mean from a handful of requests can be off by 10x, and an instance that looks
    // 10x slower gets no traffic, so no new completion would ever correct it.
    let Nm = N;
    let Sm = S;
    let haveSm = haveS;
    // Older intervals fade toward the prior with the time they have been out of the window
    // (τ = window length); the stop rule counts raw completions, so the intervals used are as before.
    const prior = this.older.length > 0 ? this.prior?.() : undefined;
    const fade = prior !== undefined && Number.isFinite(prior.es) && Number.isFinite(prior.es2) && prior.es > 0;
    let Nraw = N;
    let toPrior = 0;
    for (let k = this.older.length - 1; k >= 0 && Nraw < this.minMomentCompletions; k--) {
      const d = this.older[k];
      if (d.dN === undefined || d.dSumMs === undefined) continue;
      const w = fade ? Math.exp(-Math.max(0, now - this.windowMs - d.t1) / this.windowMs) : 1;
      Nraw += d.dN;
      toPrior += (1 - w) * d.dN;
      Nm += w * d.dN;
      Sm += w * d.dSumMs;
      haveSm = true;
      if (d.service) svc.add(scaleHist(d.service, w));
    }
    this.invalid = undefined;
    const recentResets = this.resetTimes.filter((r) => r > now - this.windowMs).length;
    if (recentResets >= 2) this.invalid = `a counter went backwards ${recentResets} times within ${this.windowMs / 1000} s (not a restart)`;
    else if (Nm > 0 && haveSm && !(Sm > 0)) {
      // requests completed but took no time: the exporter's sum is broken (an E[S] of 0 would take all traffic)
      this.invalid = `service-time sum did not grow while ${Math.round(Nm)} requests completed`;
    } else if (Nm + toPrior > 0 && haveSm) {
      this.lastKnown.esMs = toPrior > 0 && prior ? (Sm + toPrior * prior.es) / (Nm + toPrior) : Sm / Nm;
      if (svc.bounds && svc.nonEmpty()) {
        const m = secondMomentFromBuckets(svc.bounds, svc.counts, svc.sumMs, this.assumedScv);
        this.lastKnown.es2Ms2 = m.es2;
        this.lastKnown.es2Method = m.method;
        this.lastKnown.es2ErrBoundMs2 = m.errBound;
      } else {
        const es = Sm / Nm;
        this.lastKnown.es2Ms2 = (1 + this.assumedScv) * es * es;
        this.lastKnown.es2Method = 'assumed-scv';
        this.lastKnown.es2ErrBoundMs2 = NaN;
      }
      if (toPrior > 0 && prior) {
        const own = Nm > 0 && Number.isFinite(this.lastKnown.es2Ms2) ? this.lastKnown.es2Ms2 : prior.es2;
        const es = this.lastKnown.esMs;
        this.lastKnown.es2Ms2 = Math.max(es * es, (Nm * own + toPrior * prior.es2) / (Nm + toPrior));
      }
    }
    if (lat.bounds && lat.nonEmpty()) {
      this.lastKnown.p50Ms = histQuantile(lat.bounds, lat.counts, 0.5);
      this.lastKnown.p99Ms = histQuantile(lat.bounds, lat.counts, 0.99);
    } else if (last && (last.summaryP99Ms !== undefined || last.summaryP50Ms !== undefined)) {
      this.lastKnown.p50Ms = last.summaryP50Ms ?? NaN;
      this.lastKnown.p99Ms = last.summaryP99Ms ?? NaN;
    } else if (lat.bounds) {
      // No request finished in the window: the latency quantiles are unknown, not the old ones.
      // An instance de-weighted or excluded as slow gets little or no traffic, so a kept P99 would
      // keep it out for good; unknown gives health score 1 and the next window judges it again
      // (as Envoy's outlier detection brings an ejected host back after its ejection time).
      this.lastKnown.p50Ms = NaN;
      this.lastKnown.p99Ms = NaN;
    }

    const es = this.lastKnown.esMs;
    const rhoLoad = Number.isFinite(lambda) && Number.isFinite(es) ? (lambda * es) / 1000 / c : NaN;
    const running = this.obs.filter((o) => o.s.running !== undefined).map((o) => o.s.running as number);
    const rhoOcc = running.length > 0 ? running.reduce((a, b) => a + b, 0) / running.length / c : NaN;
    const gpu = last?.gpuUtil ?? NaN;
    const loadPart = Number.isFinite(rhoLoad) ? rhoLoad : rhoOcc;
    let rho: number;
    const fin = (xs: number[]): number[] => xs.filter((x) => Number.isFinite(x));
    if (this.rhoCombine === 'gpu' && Number.isFinite(gpu)) rho = gpu;
    else if (this.rhoCombine === 'max') rho = fin([loadPart, gpu]).length ? Math.max(...fin([loadPart, gpu])) : NaN;
    else rho = loadPart;
    if (!Number.isFinite(rho) && Number.isFinite(lambda) && lambda === 0) rho = 0;

    // queue unknown (no waiting and no running gauge): Little's law over the window stands in
    const gauged = last ? inSystem(last) : undefined;
    const lam = Number.isFinite(lambda) ? lambda : 0;
    const wq = NQ > 0 ? Math.max(0, Q / NQ) : 0;
    const little = Number.isFinite(es) ? (lam * (es + wq)) / 1000 : lam === 0 ? 0 : NaN;
    return {
      lambdaPerS: Number.isFinite(lambda) ? lambda : 0,
      departuresPerS: Number.isFinite(departures) ? departures : 0,
      esMs: this.lastKnown.esMs,
      es2Ms2: this.lastKnown.es2Ms2,
      es2Method: this.lastKnown.es2Method,
      es2ErrBoundMs2: this.lastKnown.es2ErrBoundMs2,
      p50Ms: this.lastKnown.p50Ms,
      p99Ms: this.lastKnown.p99Ms,
      rho,
      rhoLoad,
      rhoOcc,
      gpuUtil: gpu,
      concurrency: c,
      concurrencySource: cSrc,
      slotsSource: cSrc === 'configured' ? 'configured' : cSrc === 'exporter' ? 'exporter' : 'inferred',
      slotsFloor: cSrc === 'inferred-max-running' || cSrc === 'default',
      queueGrowing: (last?.waiting ?? 0) > 0 && waitingGrew(this.waitingSeen, now),
      invalid: this.invalid,
      queueDepth: gauged ?? (last ? little : NaN),
      queueSource: gauged === undefined && last ? 'little' : 'gauges',
      waiting: last?.waiting ?? NaN,
      running: last?.running ?? NaN,
      kvCacheUsage: last?.kvCacheUsage ?? NaN,
      windowCompletions: N,
      windowCoveredMs: T * 1000,
      counterResets: this.resets,
      baselineP99Ms: NaN,
      lastObservedAt: this.prev?.t ?? now,
    };
  }
}

function scaleHist(h: HistDelta, w: number): HistDelta {
  return w === 1 ? h : { boundsMs: h.boundsMs, counts: h.counts.map((c) => c * w), sumMs: h.sumMs * w, count: h.count * w };
}

function sameBounds(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * Whether `waiting` rose over each of the last QUEUE_GROWTH_SCRAPES steps ending at `now`: the
 * value now above the one at or before now − step, that one above the one at or before now − 2·step,
 * and so on (the latest sample at or before each step boundary; a boundary before the history: no).
 */
export function waitingGrew(seen: ReadonlyArray<readonly [number, number]>, now: number): boolean {
  if (seen.length < QUEUE_GROWTH_SCRAPES + 1) return false;
  let cur = seen[seen.length - 1][1];
  let idx = seen.length - 1;
  for (let k = 1; k <= QUEUE_GROWTH_SCRAPES; k++) {
    const at = now - k * QUEUE_GROWTH_STEP_MS;
    while (idx >= 0 && seen[idx][0] > at) idx--;
    if (idx < 0) return false;
    const w = seen[idx][1];
    if (!(cur > w)) return false;
    cur = w;
  }
  return true;
}
