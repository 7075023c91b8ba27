// The pure rules of in-band learning (docs/inband.md): the estimators, their constants and the
// fusion rule that turns one instance's state into the factor its scraped cost is multiplied by.
// The per-slot state they read is InbandTable (inband.ts).
//
// Estimators (t = time of the sample, at = time of the previous one, τ = tauMs):
//   peak   y > peak ? y : peak·w + y·(1 − w), w = e^(−(t − at)/τ)      (Finagle / tower PeakEwma)
//          fed y = min(x, previous x): one heavy-tailed answer is not a peak, two in a row are
//          (with lognormal σ 1.1 service one answer in eight exceeds twice the mean; two in a row
//          one in seventy), so the factor stays near 1 on healthy instances
//   ref    the mean of the first 32 samples, then ref + a·(x − ref), a = min(1 − e^(−(t − at)/refTauMs),
//          1/32) (the instance's own norm); not fed while the instance is slow (judge())
//   error  e·e^(−(t − at)/errorTauMs), then += errorStep·(isError − e)  (per response)
//   pile   (outstanding + 1) / (send rate · whole-time norm + 1)         (InbandTable.pile)
//   own    n · max(0, E[S] − (E[S]/c) · factor): what the backlog term misses of our n outstanding
//          requests, each a whole E[S] when served in turn (ownPrice; docs/inband.md)
// for the time to response headers (TTFT when streaming) and to end of stream (2xx/3xx/4xx
// answers; 5xx and resets only count as errors).

/**
 * Stride of `adj`: [factor, queue override (NaN: none), queue cap (Infinity: none), own price (ms,
 * added to the factored cost: ownPrice, InbandTable.ownPriceAt)] per slot.
 */
export const ADJ_STRIDE: i32 = 4;

/**
 * What our own n outstanding requests add to an instance's price (ms) beyond the backlog term,
 * which already counts each of them at perMs · factor (E[S]/c times the in-band factor: one
 * departure interval of a busy instance, the in-parallel discipline). Served in turn (c = 1, or an
 * instance that serves nothing in parallel whatever c says: a stall, a lock) each costs the next
 * request its service time es; at large c, where E[S]/c -> 0, that is the only trace a pile-up
 * of ours leaves (LEAST_REQUEST's count, peak EWMA's latency x pending). Each request of ours is
 * priced once, at the worse of the two: n · max(es, perMs · factor) in all, of which the backlog
 * holds n · perMs · factor. 0 for n <= 0 or no es. docs/inband.md "Our own requests".
 */
export function ownPrice(n: f64, es: f64, perMs: f64, factor: f64): f64 {
  if (!(n > 0) || !(es > 0)) return 0;
  const queued = perMs > 0 ? perMs * factor : 0;
  return es > queued ? n * (es - queued) : 0;
}

/**
 * The queue seen in the time to headers (InbandTable.headers): a wait above this many E[S]/c (the
 * mean time between departures of a busy instance) says every slot was busy and requests were
 * queued ahead; at or below it, the instance had a free slot when the request started (at most
 * c − 1 others in it). The unqueued time to headers is not a constant: it grows with the request
 * (prefill; in the benchmark 0.1 × its service time, 0.4 × E[S]/c on average, heavy-tailed), so
 * the wait above its floor is often a fraction of E[S]/c with no queue at all. At ¼ almost half
 * the unqueued answers of the benchmark read as "all c slots busy", a phantom queue of c − 1 less
 * ours on every instance.
 */
export const WAIT_BUSY: f64 = 1;
/** Requests ahead counted from one wait at most this many times c (a heavy-tailed residual is not a queue). */
export const WAIT_MAX_SLOTS: f64 = 8;
/** Weight of a new wait sample in the queue estimate (the previous one, when newer than the scrape, keeps the rest). */
export const WAIT_STEP: f64 = 0.5;
/**
 * The level correction needs answers this many times faster than the scraped E[S]: the service
 * sample (headers to end, a pair minimum of a heavy-tailed time) is often half the mean on a
 * healthy instance, and a margin of 2 lowered healthy instances' prices at random (fleet A,
 * rho 0.95: P99 0.78x -> 1.29x LEAST_REQUEST, bench/routing/run.ts --quick).
 */
export const LEVEL_MARGIN: f64 = 4;


/**
 * An answer is normal when its service sample is at most this many times the instance's norm
 * (lognormal sigma 1.1: 7 answers in 8 on a healthy instance, 1 in 6 on one 10x slower).
 */
export const NORMAL_RATIO: f64 = 2;
/**
 * A slowdown is also judged from a slow score (judge(): +1 per answer above SLOW_RUN_RATIO × the
 * norm, −1 per normal one, between 0 and SLOW_RUN) reaching SLOW_RUN: a sustained 2.5x, seen
 * before any pair above slowdownThreshold (in the benchmark the first 2 s of a 10x episode were
 * 2-4x answers, shortened by out-of-order completion). On one 10x slower three answers in four
 * are above 2.5x the norm; it only starts the verdict -- the price needs the pair (fuseFactor).
 */
export const SLOW_RUN: i32 = 3;
export const SLOW_RUN_RATIO: f64 = 2.5;
/** Normal answers in a row, after a slowdown this proxy saw, that make the instance "recovered". */
export const RECOVERY_ANSWERS: i32 = 3;
/**
 * Answers in a row above SLOW_RUN_RATIO x the norm (the verdict's pair among them) before a verdict
 * is held at the whole ratio (fuseFactor `held`): a pair above slowdownThreshold is a healthy
 * instance's tail every few seconds in a fleet, and held until recovery it kept that instance out
 * for seconds (fleet B at rho 0.95: 0.62 vs 0.53 x LEAST_REQUEST over 10 paths); a third answer
 * above 2.5x right after the pair comes ~1 in 12 pairs of a healthy instance, and almost always
 * from a 10x slower one.
 */
export const HOLD_ANSWERS: i32 = 3;
/**
 * How long after the last slow answer a recovery still corrects the scrape: the agent's P99
 * window (10 s) plus the fade of its E[S] (tau = the window), about twice over.
 */
export const RECOVERY_MEMORY_MS: f64 = 30000;
/** Scrapes the calibration (InbandTable.calib) averages over. */
export const CALIB_SCRAPES: f64 = 16;

export class InbandParams {
  tauMs: f64 = 1000;
  refTauMs: f64 = 15000;
  /** Slowdown (peak / own norm) below this is noise; above it, the cost is multiplied by ratio / threshold. */
  slowdownThreshold: f64 = 5;
  errorTauMs: f64 = 2000;
  errorStep: f64 = 0.25;
  errorWeight: f64 = 10;
  /** Lowest level factor: how far fresh fast answers may price an instance below its scraped E[S]. */
  minLevel: f64 = 0.05;
  /**
   * How long a level correction holds without fresh answers: a few of the agent's E[S] windows (10 s by
   * default), the time its scrape needs to forget an episode (its fade has τ = the window). Sparse answers (probes, ~1/s) must
   * not let the correction fade between two of them.
   */
  levelTauMs: f64 = 30000;
}

@inline export function decay(now: f64, at: f64, tau: f64): f64 {
  const d = now - at;
  return d <= 0 ? 1 : Math.exp(-d / tau);
}

/** Peak-sensitive EWMA step (see the header). `peak` 0 = no data yet. */
export function peakStep(peak: f64, x: f64, dtMs: f64, tauMs: f64): f64 {
  if (peak <= 0 || x >= peak) return x;
  const w = dtMs <= 0 ? 1 : Math.exp(-dtMs / tauMs);
  return peak * w + x * (1 - w);
}

/**
 * The norm's step: a time-based EWMA whose weight per sample is at most 1/REF_MIN_SAMPLES, so that
 * sparse samples (an instance priced out, answering a probe every few seconds) do not make a
 * slow episode its norm within a few answers. `ref` 0 = no data yet. `evidence`: the smaller of
 * this answer and the one before it (the verdict's pair), +Infinity while a verdict is in force;
 * the outlier clamp applies only when it too is above outlierAbove × the norm, or to a sparse
 * answer (weight at the 1/REF_MIN_SAMPLES cap).
 */
export function ewmaStep(ref: f64, x: f64, dtMs: f64, tauMs: f64, outlierAbove: f64 = Infinity, n: f64 = REF_MIN_SAMPLES, evidence: f64 = Infinity): f64 {
  if (ref <= 0) return x;
  // the first REF_MIN_SAMPLES answers: their running mean (n = samples so far), no outlier rule --
  // started from the first answer alone, a short one left the norm far too low for minutes
  if (n < REF_MIN_SAMPLES) return ref + (x - ref) / (n + 1);
  let a = dtMs <= 0 ? 0 : 1 - Math.exp(-dtMs / tauMs);
  const sparse = a >= 1.0 / REF_MIN_SAMPLES;
  if (sparse) a = 1.0 / REF_MIN_SAMPLES;
  // A sample above outlierAbove × the norm that comes with evidence of a slowdown is not a new
  // norm: it counts as outlierAbove × the norm, 8× slower (a lasting change is still learnt, over
  // minutes: +0.5 % of the norm per answer at the default threshold 5, ×10 in ~500 answers).
  // Unclamped, the answers of a 30 s episode raised the norm by half, and a recovered instance
  // looked slow. A lone long answer of a healthy instance is its own tail and counts whole:
  // clamped, the tail of lognormal sigma 2 (58 % of its mean lies above 5 × the mean) held the
  // norm at 0.21 × the mean, and its healthy answers read as slow pairs (docs/inband.md).
  const bound = outlierAbove * ref;
  if (x > bound && (sparse || evidence > bound)) { a *= 0.125; x = bound; }
  return ref * (1 - a) + x * a;
}

/** The norm moves by at most 1/32 of the gap per sample (a running mean of the first 32). */
export const REF_MIN_SAMPLES: f64 = 32;
/** Answers before the norm judges one slow or normal (a mean of fewer is too noisy at sigma 1.1). */
export const JUDGE_MIN_SAMPLES: f64 = 8;

/**
 * The fusion rule (docs/inband.md), a pure function of one instance's state at `now`:
 *   slow  = max(the answers: eosPeak/eosRef faded to 1 with τ since its last sample, priced as
 *           ratio/threshold above slowdownThreshold, or `held` (InbandTable.judgedSlow, the peak
 *           above the threshold) as the whole ratio, not faded; eos* is the service sample
 *           (headers to end of stream, see done()) -- and the pile of our outstanding requests
 *           (InbandTable.pile, Little's law: evidence before any answer), as its whole ratio)
 *   level = recovered (InbandTable.recovered): min(1, calib·eosRef / E[S]scraped);
 *           else, after RECOVERY_ANSWERS normal answers: min(1, LEVEL_MARGIN·eosPeak / E[S]scraped)
 *           faded to 1 with levelTauMs; >= minLevel: fresh answers correct a scrape that still
 *           remembers a slow episode
 *   error = 1 + errorWeight · e / (1 − e), e = max(own error rate, ORCA eps/rps), faded with errorTauMs
 *   factor = slow · level · error  (multiplies the scraped cost)
 */
export function fuseFactor(p: InbandParams, now: f64,
  hdrPeak: f64, hdrRef: f64, hdrAt: f64, eosPeak: f64, eosRef: f64, eosAt: f64,
  pile: f64, esScrapeMs: f64, err: f64, errAt: f64, orcaErr: f64, orcaAt: f64, recovered: bool = false,
  normalRun: f64 = RECOVERY_ANSWERS, calib: f64 = 0, held: bool = false): f64 {
  const slow = answerSlow(p, now, eosPeak, eosRef, eosAt, recovered, held);
  return (pile > slow ? pile : slow) * levelError(p, now, eosPeak, eosRef, eosAt, esScrapeMs, err, errAt, orcaErr, orcaAt, recovered, normalRun, calib, held);
}

/**
 * The slowdown the answers say (fuseFactor's `slow` without the pile): the request path takes the
 * larger of it and the pile at each send (InbandTable.sent), so it is kept apart.
 */
export function answerSlow(p: InbandParams, now: f64, eosPeak: f64, eosRef: f64, eosAt: f64, recovered: bool, held: bool): f64 {
  // Time to headers carries the queue ahead of the request, which the backlog term already prices:
  // in the slowdown it made loaded instances look slow (4 proxies at rho 0.95: 1.46x / 1.71x
  // LEAST_REQUEST instead of 1.0x / 1.26x, docs/inband.md). It is not priced.
  // The pair-minimum peak over the norm is gated by slowdownThreshold and priced as ratio /
  // threshold above it: priced as the whole ratio, the false alarms of healthy instances (a pair
  // above the gate: ~1 in 600 at lognormal sigma 1.1, every few seconds in an 8-instance fleet)
  // cost them 5-7x for a second and sent their requests to the sick instance.
  let slow: f64 = 1;
  if (eosRef > 0 && eosPeak > 0) {
    const r = eosPeak / eosRef;
    if (held && r > p.slowdownThreshold) {
      // judged slow (InbandTable.judgedSlow) and a pair of answers above slowdownThreshold x the
      // norm: priced as the whole peak ratio, not faded, until the instance recovers
      slow = r;
    } else if (!recovered) {
      const up = r > 1 ? 1 + (r - 1) * decay(now, eosAt, p.tauMs) : 1;
      if (up > p.slowdownThreshold) slow = up / p.slowdownThreshold;
    }
  }
  return slow;
}

/** fuseFactor's level × error (the parts that do not change with a send). */
export function levelError(p: InbandParams, now: f64, eosPeak: f64, eosRef: f64, eosAt: f64,
  esScrapeMs: f64, err: f64, errAt: f64, orcaErr: f64, orcaAt: f64, recovered: bool,
  normalRun: f64, calib: f64, held: bool, errScale: f64 = 1, lastErr: bool = false): f64 {
  let level: f64 = 1;
  const esNormal = eosRef * (calib > 0 ? calib : 1);
  if (recovered && esScrapeMs > 0 && esNormal > 0 && esNormal < esScrapeMs) {
    // a slowdown this proxy saw has ended (recovered()): its fresh answers, not the scrape that
    // still remembers the episode, set the level
    level = esNormal / esScrapeMs;
    if (level < p.minLevel) level = p.minLevel;
  } else if (!held && normalRun >= <f64>RECOVERY_ANSWERS && esScrapeMs > 0 && eosPeak > 0 && LEVEL_MARGIN * eosPeak < esScrapeMs) {
    level = 1 + (LEVEL_MARGIN * eosPeak / esScrapeMs - 1) * decay(now, eosAt, p.levelTauMs);
    if (level < p.minLevel) level = p.minLevel;
  }
  let e = err > 0 ? err * decay(now, errAt, p.errorTauMs) : 0;
  // while the latest answer was an error nothing says the instance is better: the rate fades no
  // lower than one answer's weight (an error answered at the last probe priced a black hole
  // below its peers again within ~4 s: c = 1 and 4, 80-130 errors per episode against 43-87
  // before the pile). A 2xx answer (a probe's: probePick) ends the floor.
  if (lastErr && e < p.errorStep) e = p.errorStep;
  if (orcaErr > 0) e = Math.max(e, orcaErr * decay(now, orcaAt, p.errorTauMs));
  if (e > 0.99) e = 0.99;
  // errScale (>= 1): the service's usual E[S] over this instance's scraped one. The time to a fast
  // 5xx is no service time: a black hole's scraped E[S] falls to its 2 ms answers within the
  // agent's window, and its price e / (1 − e) x that E[S] then fell below its answering peers'
  // between two probes (the errors faded): bursts of 60-80 requests to it per 500 ms (c = 4,
  // matrix). A failed request costs a retry at a usual instance, whatever the failing one's E[S].
  const error = 1 + p.errorWeight * (e / (1 - e)) * (errScale > 1 ? errScale : 1);
  return level * error;
}
