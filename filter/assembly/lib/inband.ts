// In-band signals per instance (pure): what this proxy's own responses say about each instance,
// fused with the agent's scrape into one cost factor per in-flight slot (docs/inband.md).
//
// Indexed like the in-flight table (lib/inflight.ts): one entry per slot, bounded by the live
// fleet; a slot reused for another address (its generation changed) starts from nothing. The
// request path reads only `adj` (factor, queue override, queue cap per slot); everything else is
// written on the response path and on the tick.
//
// Estimators (t = time of the sample, at = time of the previous one, τ = tauMs):
//   peak   y > peak ? y : peak·w + y·(1 − w), w = e^(−(t − at)/τ)      (Finagle / tower PeakEwma)
//          fed y = min(x, previous x): one heavy-tailed answer is not a peak, two in a row are
//          (with lognormal σ 1.1 service one answer in eight exceeds twice the mean; two in a row
//          one in seventy), so the factor stays near 1 on healthy instances
//   ref    the mean of the first 32 samples, then ref + a·(x − ref), a = min(1 − e^(−(t − at)/refTauMs),
//          1/32) (the instance's own norm); not fed while the instance is slow (judge())
//   error  e·e^(−(t − at)/errorTauMs), then += errorStep·(isError − e)  (per response)
// for the time to response headers (TTFT when streaming) and to end of stream (2xx/3xx/4xx
// answers; 5xx and resets only count as errors).
import { OrcaReport } from "./orca";

/** Stride of `adj`: [factor, queue override (NaN: none), queue cap (Infinity: none)] per slot. */
export const ADJ_STRIDE: i32 = 3;
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

/** Probe spacing doubles at most this often (idleMs · 4: a recovered instance is probed within 4 s by default). */
export const MAX_PROBE_BACKOFF: i32 = 2;

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
/**
 * A recovered instance's E[S] is priced at no more than this margin over calib × its norm (what
 * the scrape said while it answered normally): the scrape that still remembers the episode is
 * stale; the margin keeps the instance a little dearer than a healthy one while it catches up.
 */
export const RECOVERED_MARGIN: f64 = 1.1;
/** Scrapes the calibration (InbandTable.calib) averages over. */
export const CALIB_SCRAPES: f64 = 16;

export class InbandParams {
  tauMs: f64 = 1000;
  refTauMs: f64 = 30000;
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

@inline function decay(now: f64, at: f64, tau: f64): f64 {
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
 * slow episode its norm within a few answers. `ref` 0 = no data yet.
 */
export function ewmaStep(ref: f64, x: f64, dtMs: f64, tauMs: f64, outlierAbove: f64 = Infinity, n: f64 = REF_MIN_SAMPLES): f64 {
  if (ref <= 0) return x;
  // the first REF_MIN_SAMPLES answers: their running mean (n = samples so far), no outlier rule --
  // started from the first answer alone, a short one left the norm far too low for minutes
  if (n < REF_MIN_SAMPLES) return ref + (x - ref) / (n + 1);
  let a = dtMs <= 0 ? 0 : 1 - Math.exp(-dtMs / tauMs);
  if (a > 1.0 / REF_MIN_SAMPLES) a = 1.0 / REF_MIN_SAMPLES;
  // A sample above outlierAbove × the norm is evidence of a slowdown, not of a new norm: it counts
  // as outlierAbove × the norm, 8× slower (a lasting change is still learnt, over minutes: +0.5 %
  // of the norm per answer at the default threshold 5, ×10 in ~500 answers). Unclamped, the
  // answers of a 30 s episode raised the norm by half, and a recovered instance looked slow.
  if (x > outlierAbove * ref) { a *= 0.125; x = outlierAbove * ref; }
  return ref * (1 - a) + x * a;
}

/** The norm moves by at most 1/32 of the gap per sample (a running mean of the first 32). */
export const REF_MIN_SAMPLES: f64 = 32;
/** Answers before the norm judges one slow or normal (a mean of fewer is too noisy at sigma 1.1). */
export const JUDGE_MIN_SAMPLES: f64 = 8;

/**
 * The fusion rule (docs/inband.md), a pure function of one instance's state at `now`:
 *   slow  = max(eosPeak/eosRef faded to 1 with τ since its last sample, the mean time requests
 *           have been answering (headers seen, not ended) / (2·eosRef) when above eosPeak -- current);
 *           eos* is the service sample (headers to end of stream, see done()); the cost is
 *           multiplied by slow/threshold above the threshold; `held` (InbandTable.judgedSlow) with
 *           the peak above the threshold: by the whole eosPeak/eosRef, not faded
 *   level = recovered (InbandTable.recovered): min(1, RECOVERED_MARGIN·calib·eosRef / E[S]scraped);
 *           else, after RECOVERY_ANSWERS normal answers: min(1, LEVEL_MARGIN·eosPeak / E[S]scraped)
 *           faded to 1 with levelTauMs; >= minLevel: fresh answers correct a scrape that still
 *           remembers a slow episode
 *   error = 1 + errorWeight · e / (1 − e), e = max(own error rate, ORCA eps/rps), faded with errorTauMs
 *   factor = slow · level · error  (multiplies the scraped cost)
 */
export function fuseFactor(p: InbandParams, now: f64,
  hdrPeak: f64, hdrRef: f64, hdrAt: f64, eosPeak: f64, eosRef: f64, eosAt: f64,
  openAgeMs: f64, esScrapeMs: f64, err: f64, errAt: f64, orcaErr: f64, orcaAt: f64, recovered: bool = false,
  normalRun: f64 = RECOVERY_ANSWERS, calib: f64 = 0, held: bool = false): f64 {
  // Time to headers carries the queue ahead of the request, which the backlog term already prices:
  // in the slowdown it made loaded instances look slow (4 proxies at rho 0.95: 1.46x / 1.71x
  // LEAST_REQUEST instead of 1.0x / 1.26x, docs/inband.md). It is kept (hdr*), not priced.
  // Two kinds of evidence, each gated by slowdownThreshold and priced as ratio / threshold above
  // it: the pair-minimum peak over the norm, and the age of requests still answering. Priced as
  // the whole ratio, the false alarms of healthy instances (a pair above the gate: ~1 in 600 at
  // lognormal sigma 1.1, every few seconds in an 8-instance fleet) cost them 5-7x for a second and
  // sent their requests to the sick instance (measured: more requests to it during the episode).
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
    // requests caught answering are length-biased: their mean age is E[S²]/(2·E[S]), ~1.7·E[S]
    // for the lognormal σ 1.1 of the benchmark -- so the age counts against twice the norm
    if (openAgeMs > eosPeak) {
      const age = openAgeMs / (2 * eosRef);
      if (age > p.slowdownThreshold && age / p.slowdownThreshold > slow) slow = age / p.slowdownThreshold;
    }
  }
  let level: f64 = 1;
  const esNormal = eosRef * (calib > 0 ? calib : 1);
  if (recovered && esScrapeMs > 0 && esNormal > 0 && RECOVERED_MARGIN * esNormal < esScrapeMs) {
    // a slowdown this proxy saw has ended (recovered()): its fresh answers, not the scrape that
    // still remembers the episode, set the level
    level = RECOVERED_MARGIN * esNormal / esScrapeMs;
    if (level < p.minLevel) level = p.minLevel;
  } else if (!held && normalRun >= <f64>RECOVERY_ANSWERS && esScrapeMs > 0 && eosPeak > 0 && LEVEL_MARGIN * eosPeak < esScrapeMs) {
    level = 1 + (LEVEL_MARGIN * eosPeak / esScrapeMs - 1) * decay(now, eosAt, p.levelTauMs);
    if (level < p.minLevel) level = p.minLevel;
  }
  let e = err > 0 ? err * decay(now, errAt, p.errorTauMs) : 0;
  if (orcaErr > 0) e = Math.max(e, orcaErr * decay(now, orcaAt, p.errorTauMs));
  if (e > 0.99) e = 0.99;
  const error = 1 + p.errorWeight * e / (1 - e);
  return slow * level * error;
}

export class InbandTable {
  /** Default parameters; each slot uses its service's (paramsOf, set on rebuild). */
  params: InbandParams = new InbandParams();
  paramsOf: Array<InbandParams> = [];
  /** Per slot [factor, queue override, queue cap]: what the request path reads (ADJ_STRIDE). */
  adj: Array<f64> = [];
  gen: Array<u32> = [];
  hdrPeak: Array<f64> = [];
  hdrRef: Array<f64> = [];
  hdrAt: Array<f64> = [];
  hdrPrev: Array<f64> = [];
  /**
   * The time to headers of an unqueued request: a floor that follows lower samples quickly and
   * higher ones slowly (about the 2nd percentile), so that time to headers − floor is the wait.
   */
  hdrFloor: Array<f64> = [];
  /** When the queue override/cap's observation was made (request start for a wait, report time for ORCA). */
  qAt: Array<f64> = [];
  eosPrev: Array<f64> = [];
  eosPeak: Array<f64> = [];
  eosRef: Array<f64> = [];
  eosAt: Array<f64> = [];
  err: Array<f64> = [];
  errAt: Array<f64> = [];
  /**
   * Start time of the latest request whose answer was slow (pair minimum above slowdownThreshold ×
   * norm; 0: none), normal answers in a row to requests started after it, and the latest start time
   * of those: judged by when a request STARTED, so that the slow tail of requests sent during an
   * episode does not hide a recovery, and normal answers during one do not fake it.
   */
  slowAt: Array<f64> = [];
  normalRun: Array<f64> = [];
  normalAt: Array<f64> = [];
  /** The slow score (judge(); this VM's answers, not shared). */
  highRun: Array<i32> = [];
  /** Answers above SLOW_RUN_RATIO x the norm in a row, and whether HOLD_ANSWERS of them confirmed the verdict in force. */
  slowRun: Array<i32> = [];
  confirmed: Array<bool> = [];
  /** Service samples seen, up to REF_MIN_SAMPLES (the norm is a running mean until then, and judges nothing). */
  eosN: Array<f64> = [];
  /** The clock of the last tick (fuseAll): what liftsSlow() judges by at a plan rebuild. */
  nowMs: f64 = 0;
  /** Requests sent and still waiting for response headers: count and sum of their start times. */
  /** Requests answering (headers seen, not ended): count and sum of their header times. */
  openN: Array<i32> = [];
  openSum: Array<f64> = [];
  lastSentMs: Array<f64> = [];
  /** Probes: no probe to slot s before probeUntil[s]; consecutive probes without regular traffic. */
  probeUntil: Array<f64> = [];
  probeStreak: Array<i32> = [];
  /** From the scrape in force (rebuild): E[S], slots, scrape time. */
  esScrape: Array<f64> = [];
  /**
   * Scraped E[S] over the in-band norm while the instance is normal (an EWMA over scrapes, 0:
   * none yet): what the scrape says for the answers this proxy calls normal. The service sample
   * is not the agent's service time (it leaves out the time to first token, and the clock reads
   * differ), so a recovered instance is priced at calib × its norm, not at its norm.
   */
  calib: Array<f64> = [];
  slots: Array<f64> = [];
  scrapeAt: Array<f64> = [];
  /** Latest ORCA report per slot (this VM's; not shared). */
  orcaAt: Array<f64> = [];
  orcaErr: Array<f64> = [];
  orcaUtil: Array<f64> = [];
  orcaKv: Array<f64> = [];
  /** Reports refused (malformed), answers and errors seen: counters flushed on the tick. */
  orcaInvalid: i64 = 0;
  orcaValid: i64 = 0;
  errors: i64 = 0;

  size(): i32 { return this.gen.length; }

  /**
   * Makes room for `n` slots and clears any slot whose generation changed (freed and reused).
   * `live` (Inflight.liveList): only those slots are checked, so the tick costs the live fleet
   * (issue 24 #2); a free slot is cleared when it is reused, before anything reads it.
   */
  sync(n: i32, gens: Array<u32>, live: Array<i32> | null = null): void {
    while (this.gen.length < n) {
      const s = this.gen.length;
      this.gen.push(s < gens.length ? gens[s] : 0);
      this.paramsOf.push(this.params);
      this.adj.push(1); this.adj.push(NaN); this.adj.push(Infinity);
      this.hdrPeak.push(0); this.hdrRef.push(0); this.hdrAt.push(0); this.hdrPrev.push(0); this.eosPrev.push(0);
      this.hdrFloor.push(NaN); this.qAt.push(-Infinity);
      this.eosPeak.push(0); this.eosRef.push(0); this.eosAt.push(0);
      this.err.push(0); this.errAt.push(0);
      this.slowAt.push(0); this.highRun.push(0); this.slowRun.push(0); this.confirmed.push(false); this.normalRun.push(0); this.normalAt.push(0); this.eosN.push(0);
      this.lastSentMs.push(-Infinity);
      this.openN.push(0); this.openSum.push(0);
      this.probeUntil.push(-Infinity); this.probeStreak.push(0);
      this.esScrape.push(0); this.calib.push(0); this.slots.push(1); this.scrapeAt.push(-1);
      this.orcaAt.push(-Infinity); this.orcaErr.push(0); this.orcaUtil.push(NaN); this.orcaKv.push(NaN);
    }
    if (live != null) {
      for (let k = 0; k < live.length; k++) {
        const s = unchecked(live[k]);
        if (s < n && s < gens.length && this.gen[s] != gens[s]) { this.clear(s); this.gen[s] = gens[s]; }
      }
      return;
    }
    for (let s = 0; s < n && s < gens.length; s++) if (this.gen[s] != gens[s]) { this.clear(s); this.gen[s] = gens[s]; }
  }

  private clear(s: i32): void {
    this.adj[s * ADJ_STRIDE] = 1; this.adj[s * ADJ_STRIDE + 1] = NaN; this.adj[s * ADJ_STRIDE + 2] = Infinity;
    this.hdrPeak[s] = 0; this.hdrRef[s] = 0; this.hdrAt[s] = 0; this.hdrPrev[s] = 0; this.eosPrev[s] = 0;
    this.hdrFloor[s] = NaN; this.qAt[s] = -Infinity;
    this.eosPeak[s] = 0; this.eosRef[s] = 0; this.eosAt[s] = 0;
    this.err[s] = 0; this.errAt[s] = 0;
    this.slowAt[s] = 0; this.highRun[s] = 0; this.slowRun[s] = 0; this.confirmed[s] = false; this.normalRun[s] = 0; this.normalAt[s] = 0; this.eosN[s] = 0;
    this.lastSentMs[s] = -Infinity;
    this.openN[s] = 0; this.openSum[s] = 0;
    this.probeUntil[s] = -Infinity; this.probeStreak[s] = 0;
    this.esScrape[s] = 0; this.calib[s] = 0; this.slots[s] = 1; this.scrapeAt[s] = -1;
    this.orcaAt[s] = -Infinity; this.orcaErr[s] = 0; this.orcaUtil[s] = NaN; this.orcaKv[s] = NaN;
  }

  /** Slot s's cost factor (the debug header shows it). */
  @inline factorOf(s: i32): f64 { return unchecked(this.adj[s * ADJ_STRIDE]); }

  /** Whether a stream's (slot, generation) still names the slot's current address. */
  @inline valid(slot: i32, gen: u32): bool { return slot >= 0 && slot < this.gen.length && unchecked(this.gen[slot]) == gen; }

  /** The scrape in force for a slot (plan rebuild): an ORCA queue older than the scrape gives way to it. */
  onScrape(s: i32, scrapeAtMs: f64, esMs: f64, slots: f64): void {
    this.esScrape[s] = esMs;
    // calibrate only on a normal instance: no slowdown seen within RECOVERY_MEMORY_MS (the scrape
    // then still remembers it) and a settled norm
    const ref = this.eosRef[s];
    if (esMs > 0 && ref > 0 && this.eosN[s] >= REF_MIN_SAMPLES && (this.slowAt[s] == 0 || this.nowMs - this.slowAt[s] > RECOVERY_MEMORY_MS)) {
      const r = esMs / ref;
      const c = this.calib[s];
      this.calib[s] = c > 0 ? c + (r - c) / CALIB_SCRAPES : r;
    }
    this.slots[s] = slots >= 1 ? slots : 1;
    this.scrapeAt[s] = scrapeAtMs;
    if (this.orcaAt[s] <= scrapeAtMs && this.qAt[s] <= scrapeAtMs) {
      this.adj[s * ADJ_STRIDE + 1] = NaN;
      this.adj[s * ADJ_STRIDE + 2] = Infinity;
    }
  }

  /**
   * A request sent to slot s at `t` (request path: a few stores). A probe waits idleMs · 2^k
   * (k: probes in a row without regular traffic, at most MAX_PROBE_BACKOFF doublings) before the
   * next probe to the same instance; a regular choice resets k.
   */
  @inline sent(s: i32, t: f64, probeIdleMs: f64 = -1): void {
    if (probeIdleMs < 0) unchecked(this.probeStreak[s] = 0);
    else {
      // a probe to an instance judged slow with no normal answer since: the longest wait at once
      // (the verdict holds until normal answers; one every idleMs would cost ~1 request a second)
      const k = this.judgedSlow(s, t) && unchecked(this.normalRun[s]) == 0 ? MAX_PROBE_BACKOFF : unchecked(this.probeStreak[s]);
      unchecked(this.probeUntil[s] = t + probeIdleMs * <f64>(1 << (k < MAX_PROBE_BACKOFF ? k : MAX_PROBE_BACKOFF)));
      unchecked(this.probeStreak[s] = k + 1);
    }
    unchecked(this.lastSentMs[s] = t);
  }


  /**
   * Response headers of a request started at `start`, at `t`, with HTTP status `status` (the TTFT
   * sample); `sentWith` is our in-flight count to the instance when it was sent, before it (-1:
   * unknown, the wait is not read).
   */
  headers(s: i32, start: f64, t: f64, status: i32, sentWith: i32 = -1): void {
    if (status >= 500) { this.error(s, t, true); this.fuse(s, t); return; }
    this.openN[s]++;
    this.openSum[s] += t;
    this.error(s, t, false);
    const x = t - start;
    if (!(x >= 0)) return;
    if (sentWith >= 0) this.waitQueue(s, start, x, sentWith);
    const dt = t - this.hdrAt[s];
    const p = this.paramsOf[s];
    const prev = this.hdrPrev[s];
    this.hdrPrev[s] = x;
    this.hdrPeak[s] = peakStep(this.hdrPeak[s], prev > 0 && prev < x ? prev : x, dt, p.tauMs);
    this.hdrRef[s] = ewmaStep(this.hdrRef[s], x, dt, p.refTauMs, p.slowdownThreshold);
    this.hdrAt[s] = t;
    this.fuse(s, t);
  }

  /**
   * End of stream at `t` of a request started at `start` whose headers came at `hdrT`;
   * `headersSeen` false = reset before any answer (an error). The service sample is the time from
   * headers to end of stream (generation: no queueing in it), or the whole time when the answer
   * came in one piece (headers at the end).
   */
  done(s: i32, start: f64, hdrT: f64, t: f64, headersSeen: bool, status: i32): void {
    if (!headersSeen) {
      this.error(s, t, true);
      this.fuse(s, t);
      return;
    }
    if (status >= 500) return; // counted at the headers
    if (this.openN[s] > 0) {
      this.openN[s]--;
      this.openSum[s] -= hdrT;
      if (this.openN[s] == 0) this.openSum[s] = 0;
    }
    const x = t - hdrT > 1 ? t - hdrT : t - start;
    if (!(x >= 0)) return;
    const dt = t - this.eosAt[s];
    const p = this.paramsOf[s];
    const prev = this.eosPrev[s];
    const y = prev > 0 && prev < x ? prev : x;
    const ref = this.eosRef[s];
    const n = this.eosN[s];
    if (n >= JUDGE_MIN_SAMPLES) this.judge(s, t, start, x, y, ref, p);
    if (n < REF_MIN_SAMPLES) this.eosN[s] = n + 1;
    this.eosPrev[s] = x;
    const pk = this.eosPeak[s];
    this.eosPeak[s] = this.judgedSlow(s, t) ? (y > pk ? y : pk) : peakStep(pk, y, dt, p.tauMs);
    // while slow (a slowdown this proxy saw, no normal answer since) the answers belong to the
    // episode, not to the norm: the 2-5x answers of an instance 10x slower raised the norm by a
    // third over a 30 s episode, and its recovery then looked slow (feeding only the answers
    // below NORMAL_RATIO × the norm ratcheted it down instead). A lasting change is still learnt
    // from the answers that follow a normal one.
    const slowNow = this.slowAt[s] > 0 && t - this.slowAt[s] <= RECOVERY_MEMORY_MS && this.normalRun[s] == 0;
    if (!slowNow) this.eosRef[s] = ewmaStep(ref, x, dt, p.refTauMs, p.slowdownThreshold, n);
    this.eosAt[s] = t;
    this.fuse(s, t);
  }

  /**
   * Slow or normal, against the norm before this answer, by the request's start time `start`: a
   * slow pair (y = min(x, previous x) above slowdownThreshold × norm) moves slowAt to its start; a
   * normal answer (x <= NORMAL_RATIO × norm) to a request started after slowAt counts, and ends the
   * probe backoff (an instance that answers normally again is probed every idleMs until regular
   * choices return to it); a slow answer (above slowdownThreshold × norm) to a request started
   * after the latest normal one restarts the count, one in between (the heavy tail of a healthy
   * instance: 1 answer in 8 is above twice its mean) neither counts nor restarts it.
   */
  private judge(s: i32, t: f64, start: f64, x: f64, y: f64, ref: f64, p: InbandParams): void {
    if (!(ref > 0)) return;
    const at = start > 0 ? start : 1;
    // a slow pair starts an episode; within one (RECOVERY_MEMORY_MS after its last slow answer),
    // one slow answer extends it (an instance priced out answers a probe every few seconds)
    const sa = this.slowAt[s];
    // the slow score: +1 per answer above SLOW_RUN_RATIO x the norm, -1 per normal one (in
    // between: unchanged), at least 0 -- short answers of a slowed instance do not wipe it out
    // (at most SLOW_RUN: a long episode must not outlast its normal answers); only a high answer
    // that brings it to SLOW_RUN judges
    const h = this.highRun[s];
    const high = x > SLOW_RUN_RATIO * ref;
    const run = high ? (h < SLOW_RUN ? h + 1 : SLOW_RUN) : (x <= NORMAL_RATIO * ref ? (h > 0 ? h - 1 : 0) : h);
    this.highRun[s] = run;
    const sr = high ? this.slowRun[s] + 1 : 0;
    this.slowRun[s] = sr;
    // a new episode (none in memory) starts unconfirmed
    if (!(sa > 0 && t - sa <= RECOVERY_MEMORY_MS)) this.confirmed[s] = false;
    if (at > sa && (y > p.slowdownThreshold * ref || (high && run >= SLOW_RUN) || (sa > 0 && t - sa <= RECOVERY_MEMORY_MS && x > p.slowdownThreshold * ref))) {
      this.slowAt[s] = at;
      // the score starts verdicts; within one, answers above slowdownThreshold x the norm extend it
      // (a score left at SLOW_RUN let one healthy tail answer after a recovery judge it slow again)
      this.highRun[s] = 0;
      // the normal answers that count are those to requests started after the verdict: of the
      // run so far only the latest is known to be (normalAt); the run from before an episode is
      // no recovery from it
      if (at >= this.normalAt[s]) this.normalRun[s] = 0;
      else if (this.normalRun[s] > 1) this.normalRun[s] = 1;
    }
    if (sr >= HOLD_ANSWERS && this.slowAt[s] > 0) this.confirmed[s] = true;
    if (x <= NORMAL_RATIO * ref) {
      if (at <= this.slowAt[s]) return;
      if (this.normalRun[s] < 1e9) this.normalRun[s] += 1;
      if (at > this.normalAt[s]) this.normalAt[s] = at;
      this.probeStreak[s] = 0;
      this.probeUntil[s] = -Infinity;
    } else if (x > p.slowdownThreshold * ref && at >= this.normalAt[s]) this.normalRun[s] = 0;
  }

  /**
   * Recovered: this proxy saw the instance slow within RECOVERY_MEMORY_MS, and its last
   * RECOVERY_ANSWERS answers since were normal. Only a slowdown seen in-band counts: an instance
   * the agent de-weights for a tail this proxy never saw keeps its verdict.
   */
  recovered(s: i32, now: f64): bool {
    const at = this.slowAt[s];
    return at > 0 && now - at <= RECOVERY_MEMORY_MS && this.normalRun[s] >= <f64>RECOVERY_ANSWERS && this.normalAt[s] > at;
  }

  /**
   * Judged slow: this proxy saw a slowdown within RECOVERY_MEMORY_MS and the instance has not
   * recovered() since. While it holds, the service peak neither fades with time nor decays toward
   * lower answers: the verdict stands until RECOVERY_ANSWERS normal answers (or the memory's end).
   */
  judgedSlow(s: i32, now: f64): bool {
    const at = this.slowAt[s];
    return at > 0 && now - at <= RECOVERY_MEMORY_MS && !this.recovered(s, now);
  }

  /**
   * Recovering: judged slow (a verdict within RECOVERY_MEMORY_MS, not recovered) with a normal
   * answer since (it may be back): probes to it come as soon as its wait ends (probePick).
   */
  recovering(s: i32, now: f64): bool {
    return this.judgedSlow(s, now) && this.normalRun[s] > 0;
  }

  /**
   * Whether fresh answers overrule the agent's health de-weighting of the address in `slot`
   * (generation `gen`) at a plan rebuild: recovered() by the last tick's clock, and no request
   * answering for longer than a slowdown (the factor shows no slowness now).
   */
  liftsSlow(slot: i32, gen: u32): bool {
    if (!this.valid(slot, gen)) return false;
    return this.recovered(slot, this.nowMs) && unchecked(this.adj[slot * ADJ_STRIDE]) <= 1;
  }

  /**
   * The other proxies' load from the time to headers `x` of a request started at `start`: the
   * wait (x − floor) is the queue ahead of it in units of E[S]/c, so the instance then held about
   * c − 1 + wait · c / E[S] requests besides this one, `sentWith` of them ours (our in-flight
   * count when it was sent); without a wait it had a free slot: at most c − 1. The first replaces
   * the scraped queue (as an ORCA queue does) and the second caps it, until a scrape taken after
   * `start`; an ORCA report newer than the scrape takes precedence (it counts the whole queue, at
   * its answer).
   */
  private waitQueue(s: i32, start: f64, x: f64, sentWith: i32): void {
    const f = this.hdrFloor[s];
    this.hdrFloor[s] = f == f ? (x < f ? f + 0.5 * (x - f) : f + 0.01 * (x - f)) : x;
    // the unit of the wait is the instance's usual E[S] / c (calib × norm, when known): a slowed
    // instance's scrape is stale, and its own inflated service time would hide its wait
    const cal = this.calib[s] * this.eosRef[s];
    const es = cal > 0 && cal < this.esScrape[s] ? cal : this.esScrape[s];
    const c = this.slots[s];
    if (!(es > 0) || f != f) return;
    if (this.orcaAt[s] > this.scrapeAt[s] || start <= this.qAt[s] || start <= this.scrapeAt[s]) return;
    // a slowed instance is priced by the slowdown (fuseFactor); its long waits are its own
    // service, not other proxies' load, and its free slots no news
    if (this.slowAt[s] > 0 && start - this.slowAt[s] <= RECOVERY_MEMORY_MS && this.normalRun[s] == 0) return;
    const unit = es / c;
    const w = x - f;
    const base = this.adj[s * ADJ_STRIDE + 1];
    const fresh = base == base && this.qAt[s] > this.scrapeAt[s];
    if (w > WAIT_BUSY * unit) {
      let ahead = w / unit;
      if (ahead > WAIT_MAX_SLOTS * c) ahead = WAIT_MAX_SLOTS * c;
      // the others' share then (never below none: the wait is a noisy reading of the queue)
      const q = Math.max(0, c - 1 + ahead - <f64>sentWith);
      this.adj[s * ADJ_STRIDE + 1] = fresh ? base + WAIT_STEP * (q - base) : q;
      this.adj[s * ADJ_STRIDE + 2] = Infinity;
    } else {
      // a free slot at its start: what the scrape says, at most c − 1 in the instance
      this.adj[s * ADJ_STRIDE + 1] = NaN;
      this.adj[s * ADJ_STRIDE + 2] = Math.max(0, c - 1 - <f64>sentWith);
    }
    this.qAt[s] = start;
  }

  private error(s: i32, t: f64, isError: bool): void {
    const p = this.paramsOf[s];
    let e = this.err[s] * decay(t, this.errAt[s], p.errorTauMs);
    e += p.errorStep * ((isError ? 1.0 : 0.0) - e);
    this.err[s] = e;
    this.errAt[s] = t;
    if (isError) this.errors++;
  }

  /**
   * An ORCA report on an answer from slot s at `t`; `inflightNow` is our in-flight count then.
   * Its queue (+ running = utilisation × slots) replaces the scraped queue until a newer scrape.
   */
  orca(s: i32, r: OrcaReport, t: f64, inflightNow: i32): void {
    if (!r.ok) { this.orcaInvalid++; return; }
    this.orcaValid++;
    this.orcaAt[s] = t;
    const u = r.utilization();
    this.orcaUtil[s] = u;
    this.orcaKv[s] = r.kvCache;
    this.orcaErr[s] = r.eps > 0 && r.rps > 0 ? Math.min(1, r.eps / r.rps) : 0;
    if (!isNaN(r.queue)) {
      const running = u >= 0 && u < Infinity ? Math.min(u, 1) * this.slots[s] : 0;
      this.adj[s * ADJ_STRIDE + 1] = r.queue + running - <f64>inflightNow;
      this.adj[s * ADJ_STRIDE + 2] = Infinity;
      this.qAt[s] = t;
    }
    this.fuse(s, t);
  }

  /** Recomputes slot s's factor at `now` (response path, and every tick for the decay and ages). */
  fuse(s: i32, now: f64): void {
    const m = this.openN[s];
    const recovered = this.recovered(s, now);
    // once recovered, requests still answering that started (on average) before the latest
    // normally answered one are the episode's slow tail: their age is no longer evidence
    const meanHdr = m > 0 ? this.openSum[s] / <f64>m : 0;
    const openAge = m > 0 && !(recovered && meanHdr < this.normalAt[s]) ? now - meanHdr : 0;
    this.adj[s * ADJ_STRIDE] = fuseFactor(this.paramsOf[s], now,
      this.hdrPeak[s], this.hdrRef[s], this.hdrAt[s], this.eosPeak[s], this.eosRef[s], this.eosAt[s],
      openAge, this.esScrape[s], this.err[s], this.errAt[s], this.orcaErr[s], this.orcaAt[s], recovered, this.normalRun[s], this.calib[s],
      !recovered && this.confirmed[s] && this.slowAt[s] > 0 && now - this.slowAt[s] <= RECOVERY_MEMORY_MS);
  }

  /** Tick: every slot's factor at `now` (only the `live` ones when given: Inflight.liveList). */
  fuseAll(now: f64, live: Array<i32> | null = null): void {
    this.nowMs = now;
    if (live != null) {
      for (let k = 0; k < live.length; k++) { const s = unchecked(live[k]); if (s < this.gen.length) this.fuse(s, now); }
      return;
    }
    for (let s = 0; s < this.gen.length; s++) this.fuse(s, now);
  }

  // ---------------------------------------------------------------- sharing across worker VMs
  // Document: u16 count, count × (u8 addrLen, addr, 16 × f64: hdrPeak, hdrRef, hdrAt, eosPeak,
  // eosRef, eosAt, err, errAt, lastSentMs, probeUntil, hdrPrev, eosPrev, slowAt, normalRun, normalAt, eosN). Every VM reads it, adopts per signal what
  // is newer than its own (by the sample time; the last send and the probe pacing: the later),
  // and writes back its merged table of the addresses it plans: bounded by the live fleet.

  /**
   * Merges the shared document into this table (slots by address via `slotOf`, -1: not planned
   * here) and returns the document to write back. `addrs[s]` is slot s's address ("" = free).
   * Malformed input is ignored from the first bad entry on.
   */
  merge(doc: ArrayBuffer, addrs: Array<string>, slotOf: (a: string) => i32, live: Array<i32> | null = null): ArrayBuffer {
    const p = changetype<usize>(doc);
    const n = doc.byteLength;
    if (n >= 2) {
      const count = <i32>load<u16>(p);
      let off = 2;
      for (let e = 0; e < count; e++) {
        if (off + 1 > n) break;
        const len = <i32>load<u8>(p + <usize>off);
        if (off + 1 + len + ENTRY > n) break;
        const addr = String.UTF8.decodeUnsafe(p + <usize>off + 1, <usize>len);
        const q = p + <usize>(off + 1 + len);
        off += 1 + len + ENTRY;
        const s = slotOf(addr);
        if (s < 0 || s >= this.gen.length) continue;
        const hAt = load<f64>(q + 16), eAt = load<f64>(q + 40), rAt = load<f64>(q + 56);
        if (hAt > this.hdrAt[s]) { this.hdrPeak[s] = load<f64>(q); this.hdrRef[s] = load<f64>(q + 8); this.hdrAt[s] = hAt; this.hdrPrev[s] = load<f64>(q + 80); }
        if (eAt > this.eosAt[s]) { this.normalRun[s] = load<f64>(q + 104); this.normalAt[s] = load<f64>(q + 112); this.eosN[s] = load<f64>(q + 120); }
        if (eAt > this.eosAt[s]) { this.eosPeak[s] = load<f64>(q + 24); this.eosRef[s] = load<f64>(q + 32); this.eosAt[s] = eAt; this.eosPrev[s] = load<f64>(q + 88); }
        if (rAt > this.errAt[s]) { this.err[s] = load<f64>(q + 48); this.errAt[s] = rAt; }
        const sa = load<f64>(q + 96);
        if (sa > this.slowAt[s]) this.slowAt[s] = sa;
        const ls = load<f64>(q + 64), pu = load<f64>(q + 72);
        if (ls > this.lastSentMs[s]) this.lastSentMs[s] = ls;
        // probe pacing: the later wait wins, unless a normal answer came to a request sent at or
        // after the sends it paces (the VM that saw the answer ended the backoff: judge())
        if (pu > this.probeUntil[s] && ls > this.normalAt[s]) this.probeUntil[s] = pu;
        if (this.normalAt[s] >= this.lastSentMs[s] && this.normalAt[s] > 0) { this.probeUntil[s] = -Infinity; this.probeStreak[s] = 0; }
      }
    }
    let count = 0;
    let size = 2;
    const limit = addrs.length < this.gen.length ? addrs.length : this.gen.length;
    // the slots to write: the live ones when given (issue 24 #2), else all below limit
    const nw = live != null ? live.length : limit;
    for (let k = 0; k < nw; k++) {
      const s = live != null ? unchecked(live[k]) : k;
      if (s >= limit || addrs[s].length == 0 || (this.hdrAt[s] == 0 && this.eosAt[s] == 0 && this.errAt[s] == 0)) continue;
      size += 1 + String.UTF8.byteLength(addrs[s]) + ENTRY;
      count++;
      if (count == 0xffff) break;
    }
    const out = new ArrayBuffer(size);
    const o = changetype<usize>(out);
    store<u16>(o, <u16>count);
    let off: usize = 2;
    let written = 0;
    for (let k = 0; k < nw && written < count; k++) {
      const s = live != null ? unchecked(live[k]) : k;
      if (s >= limit || addrs[s].length == 0 || (this.hdrAt[s] == 0 && this.eosAt[s] == 0 && this.errAt[s] == 0)) continue;
      const a = addrs[s];
      const len = <usize>String.UTF8.encodeUnsafe(changetype<usize>(a), a.length, o + off + 1);
      store<u8>(o + off, <u8>len);
      const q = o + off + 1 + len;
      store<f64>(q, this.hdrPeak[s]); store<f64>(q + 8, this.hdrRef[s]); store<f64>(q + 16, this.hdrAt[s]);
      store<f64>(q + 24, this.eosPeak[s]); store<f64>(q + 32, this.eosRef[s]); store<f64>(q + 40, this.eosAt[s]);
      store<f64>(q + 48, this.err[s]); store<f64>(q + 56, this.errAt[s]);
      store<f64>(q + 64, this.lastSentMs[s]); store<f64>(q + 72, this.probeUntil[s]);
      store<f64>(q + 80, this.hdrPrev[s]); store<f64>(q + 88, this.eosPrev[s]);
      store<f64>(q + 96, this.slowAt[s]); store<f64>(q + 104, this.normalRun[s]); store<f64>(q + 112, this.normalAt[s]); store<f64>(q + 120, this.eosN[s]);
      off += 1 + len + ENTRY;
      written++;
    }
    return out;
  }
}

/** Bytes per entry after the address in the shared document. */
const ENTRY: i32 = 128;

/**
 * Probe share (no absorbing state): every `every`-th request of a service may go to an eligible
 * instance that has had no request from this VM for `idleMs`, whatever its price, so that fresh
 * answers can correct an estimate nothing else would correct. Round-robin over the candidates.
 */
export class Prober {
  countdown: i32 = 0;
  cursor: i32 = 0;
  constructor(public every: i32, public idleMs: f64) { this.countdown = every; }

  /** The countdown to the next probe from a uniform draw u in [0, 1): 1 .. 2·every − 1 calls, mean `every`. */
  rephase(u: f64): void {
    if (this.every <= 0) return;
    const k = 1 + <i32>Math.floor(u * <f64>(2 * this.every - 1));
    this.countdown = k < 2 * this.every - 1 ? k : 2 * this.every - 1;
  }

  /**
   * The countdown when a probe was due but its instance still waits: 1 .. every/PROBE_RETRY_DIV
   * calls from the draw u (drawn, so worker VMs do not probe it at the same moment).
   */
  retry(u: f64): void {
    if (this.every <= 0) return;
    const span = this.every / PROBE_RETRY_DIV > 1 ? this.every / PROBE_RETRY_DIV : 1;
    const k = 1 + <i32>Math.floor(u * <f64>span);
    this.countdown = k < span ? k : span;
  }

  /** True once every `every` calls (never when every <= 0). */
  @inline due(): bool {
    if (this.every <= 0) return false;
    if (--this.countdown > 0) return false;
    this.countdown = this.every;
    return true;
  }
}

/** A probe that found its instance still waiting is retried within every / PROBE_RETRY_DIV calls. */
export const PROBE_RETRY_DIV: i32 = 8;

/** Requests between probes for a probe share (0: never; share 0.01 → every 100th request). */
export function probeEvery(share: f64): i32 {
  if (!(share > 0)) return 0;
  const e = Math.round(1 / share);
  return e < 1 ? 1 : <i32>e;
}
