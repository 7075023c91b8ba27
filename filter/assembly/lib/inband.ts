// In-band signals per instance: the per-slot state (InbandTable) that what this proxy's own
// responses say about each instance is kept in, fused with the agent's scrape into one cost factor
// per in-flight slot (docs/inband.md). The pure rules (estimators, fusion) are in inband-rules.ts,
// the probe pacing in inband-probe.ts.
//
// Indexed like the in-flight table (lib/inflight.ts): one entry per slot, bounded by the live
// fleet; a slot reused for another address (its generation changed) starts from nothing. The
// request path reads only `adj` (factor, queue override, queue cap per slot); everything else is
// written on the request path's send (a few stores), the response path and the tick.
import { OrcaReport } from "./orca";
import {
  ADJ_STRIDE, WAIT_BUSY, WAIT_MAX_SLOTS, WAIT_STEP, NORMAL_RATIO, SLOW_RUN, SLOW_RUN_RATIO, RECOVERY_ANSWERS, HOLD_ANSWERS,
  RECOVERY_MEMORY_MS, CALIB_SCRAPES, InbandParams, decay, peakStep, ewmaStep, REF_MIN_SAMPLES, JUDGE_MIN_SAMPLES, answerSlow, levelError, ownPrice,
} from "./inband-rules";
import { MAX_PROBE_BACKOFF } from "./inband-probe";
import { mergeShared } from "./inband-share";
import { readWait, readOrca, fairShares } from "./inband-load";
import { getF, setF, getI, setI, getB, setB, getU, getRef } from "./slot-array";
import { pileAt } from "./inband-pile";
export {
  ADJ_STRIDE, WAIT_BUSY, WAIT_MAX_SLOTS, WAIT_STEP, LEVEL_MARGIN, NORMAL_RATIO, SLOW_RUN, SLOW_RUN_RATIO, RECOVERY_ANSWERS, HOLD_ANSWERS,
  RECOVERY_MEMORY_MS, CALIB_SCRAPES, InbandParams, peakStep, ewmaStep, REF_MIN_SAMPLES, JUDGE_MIN_SAMPLES, fuseFactor, ownPrice,
} from "./inband-rules";
export { MAX_PROBE_BACKOFF, Prober, PROBE_RETRY_DIV, probeEvery } from "./inband-probe";

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
  /** Whether this VM's latest answer from the slot was an error (levelError: the rate's floor). */
  errLast: Array<bool> = [];
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
  /**
   * Our outstanding requests (this VM's: sent, not ended); the sends since the last tick and their rate (per ms, an EWMA over the norm below); the norm of the whole
   * time (start to end of stream) they are compared with (the pile, fuseFactor).
   */
  outN: Array<i32> = [];
  sends: Array<i32> = [];
  rate: Array<f64> = [];
  allRef: Array<f64> = [];
  rateAt: f64 = -1;
  /**
   * The pile's parts (fuse): the rate-weighted mean of λ·L over the service's live slots at the
   * last tick (what a request's instance usually holds of ours), the slowdown the answers say and
   * level × error -- the send recomputes the factor from them (sent()).
   */
  fairN: Array<f64> = [];
  /** The service's rate-weighted mean scraped E[S] (fairShares): what an error answer costs (errScale). */
  esTyp: Array<f64> = [];
  slowPart: Array<f64> = [];
  restPart: Array<f64> = [];
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
  /** Worker VMs sending (lib/xvm.ts, on the tick; 1 without cross-VM counts): the error price's share. */
  vms: f64 = 1;

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
      this.adj.push(1); this.adj.push(NaN); this.adj.push(Infinity); this.adj.push(0);
      this.hdrPeak.push(0); this.hdrRef.push(0); this.hdrAt.push(0); this.hdrPrev.push(0); this.eosPrev.push(0);
      this.hdrFloor.push(NaN); this.qAt.push(-Infinity);
      this.eosPeak.push(0); this.eosRef.push(0); this.eosAt.push(0);
      this.err.push(0); this.errAt.push(0); this.errLast.push(false);
      this.slowAt.push(0); this.highRun.push(0); this.slowRun.push(0); this.confirmed.push(false); this.normalRun.push(0); this.normalAt.push(0); this.eosN.push(0);
      this.lastSentMs.push(-Infinity);
      this.outN.push(0); this.sends.push(0); this.rate.push(0); this.allRef.push(0);
      this.fairN.push(Infinity); this.esTyp.push(0); this.slowPart.push(1); this.restPart.push(1);
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
    this.adj[s * ADJ_STRIDE] = 1; this.adj[s * ADJ_STRIDE + 1] = NaN; this.adj[s * ADJ_STRIDE + 2] = Infinity; this.adj[s * ADJ_STRIDE + 3] = 0;
    this.hdrPeak[s] = 0; this.hdrRef[s] = 0; this.hdrAt[s] = 0; this.hdrPrev[s] = 0; this.eosPrev[s] = 0;
    this.hdrFloor[s] = NaN; this.qAt[s] = -Infinity;
    this.eosPeak[s] = 0; this.eosRef[s] = 0; this.eosAt[s] = 0;
    this.err[s] = 0; this.errAt[s] = 0; this.errLast[s] = false;
    this.slowAt[s] = 0; this.highRun[s] = 0; this.slowRun[s] = 0; this.confirmed[s] = false; this.normalRun[s] = 0; this.normalAt[s] = 0; this.eosN[s] = 0;
    this.lastSentMs[s] = -Infinity;
    this.outN[s] = 0; this.sends[s] = 0; this.rate[s] = 0; this.allRef[s] = 0;
    this.fairN[s] = Infinity; this.esTyp[s] = 0; this.slowPart[s] = 1; this.restPart[s] = 1;
    this.probeUntil[s] = -Infinity; this.probeStreak[s] = 0;
    this.esScrape[s] = 0; this.calib[s] = 0; this.slots[s] = 1; this.scrapeAt[s] = -1;
    this.orcaAt[s] = -Infinity; this.orcaErr[s] = 0; this.orcaUtil[s] = NaN; this.orcaKv[s] = NaN;
  }

  /** Slot s's cost factor (the debug header shows it). */
  @inline factorOf(s: i32): f64 { return getF(this.adj.dataStart, s * ADJ_STRIDE); }

  /** The one bounds check of an answer's work (slot-array.ts reads and writes unchecked). */
  @inline checkSlot(s: i32): void { assert(<u32>s < <u32>this.gen.length, "in-band slot out of range"); }

  /** Whether a stream's (slot, generation) still names the slot's current address. */
  @inline valid(slot: i32, gen: u32): bool { return slot >= 0 && slot < this.gen.length && getU(this.gen.dataStart, slot) == gen; }

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
    if (probeIdleMs < 0) setI(this.probeStreak.dataStart, s, 0);
    else {
      // a probe to an instance judged slow with no normal answer since: the longest wait at once
      // (the verdict holds until normal answers; one every idleMs would cost ~1 request a second)
      const k = this.judgedSlow(s, t) && getF(this.normalRun.dataStart, s) == 0 ? MAX_PROBE_BACKOFF : getI(this.probeStreak.dataStart, s);
      setF(this.probeUntil.dataStart, s, t + probeIdleMs * <f64>(1 << (k < MAX_PROBE_BACKOFF ? k : MAX_PROBE_BACKOFF)));
      setI(this.probeStreak.dataStart, s, k + 1);
    }
    setF(this.lastSentMs.dataStart, s, t);
    const n = getI(this.outN.dataStart, s) + 1;
    setI(this.outN.dataStart, s, n);
    setI(this.sends.dataStart, s, getI(this.sends.dataStart, s) + 1);
    // the pile counts at once, as peak EWMA's pending count does: between ticks (20 ms) a silent
    // instance otherwise took every request sent in the meantime at its old price
    const pile = this.pileOf(s, n);
    const slow = getF(this.slowPart.dataStart, s);
    setF(this.adj.dataStart, s * ADJ_STRIDE, (pile > slow ? pile : slow) * getF(this.restPart.dataStart, s));
    setF(this.adj.dataStart, s * ADJ_STRIDE + 3, this.ownPriceAt(s, n));
  }


  /**
   * Response headers of a request started at `start`, at `t`, with HTTP status `status` (the TTFT
   * sample); `sentWith` is our in-flight count to the instance when it was sent, before it (-1:
   * unknown, the wait is not read).
   */
  headers(s: i32, start: f64, t: f64, status: i32, sentWith: i32 = -1): void {
    this.checkSlot(s);
    if (status >= 500) { this.error(s, t, true); this.fuse(s, t); return; }
    this.error(s, t, false);
    const x = t - start;
    if (!(x >= 0)) return;
    if (sentWith >= 0) readWait(this, s, start, x, sentWith);
    const dt = t - getF(this.hdrAt.dataStart, s);
    const p = getRef<InbandParams>(this.paramsOf.dataStart, s);
    const prev = getF(this.hdrPrev.dataStart, s);
    setF(this.hdrPrev.dataStart, s, x);
    setF(this.hdrPeak.dataStart, s, peakStep(getF(this.hdrPeak.dataStart, s), prev > 0 && prev < x ? prev : x, dt, p.tauMs));
    setF(this.hdrRef.dataStart, s, ewmaStep(getF(this.hdrRef.dataStart, s), x, dt, p.refTauMs, p.slowdownThreshold));
    setF(this.hdrAt.dataStart, s, t);
    this.fuse(s, t);
  }

  /**
   * End of stream at `t` of a request started at `start` whose headers came at `hdrT`;
   * `headersSeen` false = reset before any answer (an error). The service sample is the time from
   * headers to end of stream (generation: no queueing in it), or the whole time when the answer
   * came in one piece (headers at the end).
   */
  done(s: i32, start: f64, hdrT: f64, t: f64, headersSeen: bool, status: i32): void {
    this.checkSlot(s);
    if (getI(this.outN.dataStart, s) > 0) setI(this.outN.dataStart, s, getI(this.outN.dataStart, s) - 1);
    setF(this.adj.dataStart, s * ADJ_STRIDE + 3, this.ownPriceAt(s, getI(this.outN.dataStart, s)));
    if (!headersSeen) {
      this.error(s, t, true);
      this.fuse(s, t);
      return;
    }
    if (status >= 500) return; // counted at the headers
    const x = t - hdrT > 1 ? t - hdrT : t - start;
    if (!(x >= 0)) return;
    const dt = t - getF(this.eosAt.dataStart, s);
    const p = getRef<InbandParams>(this.paramsOf.dataStart, s);
    const prev = getF(this.eosPrev.dataStart, s);
    const y = prev > 0 && prev < x ? prev : x;
    const ref = getF(this.eosRef.dataStart, s);
    const n = getF(this.eosN.dataStart, s);
    if (n >= JUDGE_MIN_SAMPLES) this.judge(s, t, start, x, y, ref, p);
    if (n < REF_MIN_SAMPLES) setF(this.eosN.dataStart, s, n + 1);
    setF(this.eosPrev.dataStart, s, x);
    const pk = getF(this.eosPeak.dataStart, s);
    setF(this.eosPeak.dataStart, s, this.judgedSlow(s, t) ? (y > pk ? y : pk) : peakStep(pk, y, dt, p.tauMs));
    // while slow (a slowdown this proxy saw, no normal answer since) the answers belong to the
    // episode, not to the norm: the 2-5x answers of an instance 10x slower raised the norm by a
    // third over a 30 s episode, and its recovery then looked slow (feeding only the answers
    // below NORMAL_RATIO × the norm ratcheted it down instead). A lasting change is still learnt
    // from the answers that follow a normal one.
    const slowNow = getF(this.slowAt.dataStart, s) > 0 && t - getF(this.slowAt.dataStart, s) <= RECOVERY_MEMORY_MS && getF(this.normalRun.dataStart, s) == 0;
    if (!slowNow) {
      // the norm's clamp takes only evidence of a slowdown (ewmaStep): a slow pair, or any answer
      // while a verdict is in force (recovering: normal answers since, fewer than RECOVERY_ANSWERS)
      const evidence = this.judgedSlow(s, t) ? Infinity : y;
      setF(this.eosRef.dataStart, s, ewmaStep(ref, x, dt, p.refTauMs, p.slowdownThreshold, n, evidence));
      // the whole time's norm (the pile's L) on the service sample's evidence
      setF(this.allRef.dataStart, s, ewmaStep(getF(this.allRef.dataStart, s), t - start, dt, p.refTauMs, p.slowdownThreshold, n, evidence > p.slowdownThreshold * ref ? Infinity : 0));
    }
    setF(this.eosAt.dataStart, s, t);
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
    const sa = getF(this.slowAt.dataStart, s);
    // the slow score: +1 per answer above SLOW_RUN_RATIO x the norm, -1 per normal one (in
    // between: unchanged), at least 0 -- short answers of a slowed instance do not wipe it out
    // (at most SLOW_RUN: a long episode must not outlast its normal answers); only a high answer
    // that brings it to SLOW_RUN judges
    const h = getI(this.highRun.dataStart, s);
    const high = x > SLOW_RUN_RATIO * ref;
    const run = high ? (h < SLOW_RUN ? h + 1 : SLOW_RUN) : (x <= NORMAL_RATIO * ref ? (h > 0 ? h - 1 : 0) : h);
    setI(this.highRun.dataStart, s, run);
    const sr = high ? getI(this.slowRun.dataStart, s) + 1 : 0;
    setI(this.slowRun.dataStart, s, sr);
    // a new episode (none in memory) starts unconfirmed
    if (!(sa > 0 && t - sa <= RECOVERY_MEMORY_MS)) setB(this.confirmed.dataStart, s, false);
    if (at > sa && (y > p.slowdownThreshold * ref || (high && run >= SLOW_RUN) || (sa > 0 && t - sa <= RECOVERY_MEMORY_MS && x > p.slowdownThreshold * ref))) {
      setF(this.slowAt.dataStart, s, at);
      // the score starts verdicts; within one, answers above slowdownThreshold x the norm extend it
      // (a score left at SLOW_RUN let one healthy tail answer after a recovery judge it slow again)
      setI(this.highRun.dataStart, s, 0);
      // the normal answers that count are those to requests started after the verdict: of the
      // run so far only the latest is known to be (normalAt); the run from before an episode is
      // no recovery from it
      if (at >= getF(this.normalAt.dataStart, s)) setF(this.normalRun.dataStart, s, 0);
      else if (getF(this.normalRun.dataStart, s) > 1) setF(this.normalRun.dataStart, s, 1);
    }
    if (sr >= HOLD_ANSWERS && getF(this.slowAt.dataStart, s) > 0) setB(this.confirmed.dataStart, s, true);
    if (x <= NORMAL_RATIO * ref) {
      if (at <= getF(this.slowAt.dataStart, s)) return;
      if (getF(this.normalRun.dataStart, s) < 1e9) setF(this.normalRun.dataStart, s, getF(this.normalRun.dataStart, s) + 1);
      if (at > getF(this.normalAt.dataStart, s)) setF(this.normalAt.dataStart, s, at);
      setI(this.probeStreak.dataStart, s, 0);
      setF(this.probeUntil.dataStart, s, -Infinity);
    } else if (x > p.slowdownThreshold * ref && at >= getF(this.normalAt.dataStart, s)) setF(this.normalRun.dataStart, s, 0);
  }

  /**
   * Recovered: this proxy saw the instance slow within RECOVERY_MEMORY_MS, and its last
   * RECOVERY_ANSWERS answers since were normal. Only a slowdown seen in-band counts: an instance
   * the agent de-weights for a tail this proxy never saw keeps its verdict.
   */
  recovered(s: i32, now: f64): bool {
    const at = getF(this.slowAt.dataStart, s);
    return at > 0 && now - at <= RECOVERY_MEMORY_MS && getF(this.normalRun.dataStart, s) >= <f64>RECOVERY_ANSWERS && getF(this.normalAt.dataStart, s) > at;
  }

  /**
   * Judged slow: this proxy saw a slowdown within RECOVERY_MEMORY_MS and the instance has not
   * recovered() since. While it holds, the service peak neither fades with time nor decays toward
   * lower answers: the verdict stands until RECOVERY_ANSWERS normal answers (or the memory's end).
   */
  judgedSlow(s: i32, now: f64): bool {
    const at = getF(this.slowAt.dataStart, s);
    return at > 0 && now - at <= RECOVERY_MEMORY_MS && !this.recovered(s, now);
  }

  /**
   * Recovering: judged slow (a verdict within RECOVERY_MEMORY_MS, not recovered) with a normal
   * answer since (it may be back): probes to it come as soon as its wait ends (probePick).
   */
  recovering(s: i32, now: f64): bool {
    return this.judgedSlow(s, now) && getF(this.normalRun.dataStart, s) > 0;
  }

  /**
   * Whether fresh answers overrule the agent's health de-weighting of the address in `slot`
   * (generation `gen`) at a plan rebuild: recovered() by the last tick's clock, no slowdown in
   * the factor now and a pile of at most NORMAL_RATIO (what a normal answer may be). Gated at
   * slowdownThreshold instead (tried with the noise band above): no better on 2 quick paths.
   */
  liftsSlow(slot: i32, gen: u32): bool {
    if (!this.valid(slot, gen)) return false;
    const pile = this.pile(slot);
    return this.recovered(slot, this.nowMs) && pile <= NORMAL_RATIO && unchecked(this.adj[slot * ADJ_STRIDE]) <= (pile > 1 ? pile : 1);
  }

  private error(s: i32, t: f64, isError: bool): void {
    const p = getRef<InbandParams>(this.paramsOf.dataStart, s);
    let e = getF(this.err.dataStart, s) * decay(t, getF(this.errAt.dataStart, s), p.errorTauMs);
    e += p.errorStep * ((isError ? 1.0 : 0.0) - e);
    setF(this.err.dataStart, s, e);
    setF(this.errAt.dataStart, s, t);
    setB(this.errLast.dataStart, s, isError);
    if (isError) this.errors++;
  }

  /**
   * An ORCA report on an answer from slot s at `t`; `inflightNow` is our in-flight count then.
   * Its queue (+ running = utilisation × slots) replaces the scraped queue until a newer scrape.
   */
  orca(s: i32, r: OrcaReport, t: f64, inflightNow: i32): void { readOrca(this, s, r, t, inflightNow); }

  /** Recomputes slot s's factor at `now` (response path, and every tick for the decay and ages). */
  fuse(s: i32, now: f64): void {
    const recovered = this.recovered(s, now);
    const held = !recovered && getB(this.confirmed.dataStart, s) && getF(this.slowAt.dataStart, s) > 0 && now - getF(this.slowAt.dataStart, s) <= RECOVERY_MEMORY_MS;
    const p = getRef<InbandParams>(this.paramsOf.dataStart, s);
    const slow = answerSlow(p, now, getF(this.eosPeak.dataStart, s), getF(this.eosRef.dataStart, s), getF(this.eosAt.dataStart, s), recovered, held);
    const rest = levelError(p, now, getF(this.eosPeak.dataStart, s), getF(this.eosRef.dataStart, s), getF(this.eosAt.dataStart, s), getF(this.esScrape.dataStart, s),
      getF(this.err.dataStart, s), getF(this.errAt.dataStart, s), getF(this.orcaErr.dataStart, s), getF(this.orcaAt.dataStart, s), recovered, getF(this.normalRun.dataStart, s), getF(this.calib.dataStart, s), held,
      this.errScale(s), getB(this.errLast.dataStart, s));
    setF(this.slowPart.dataStart, s, slow);
    setF(this.restPart.dataStart, s, rest);
    const pile = this.pile(s);
    setF(this.adj.dataStart, s * ADJ_STRIDE, (pile > slow ? pile : slow) * rest);
    setF(this.adj.dataStart, s * ADJ_STRIDE + 3, this.ownPriceAt(s, getI(this.outN.dataStart, s)));
  }

  /** Slot s's own price at n of ours outstanding (ownPrice: each held for its service time, the scraped E[S]). */
  @inline ownPriceAt(s: i32, n: i32): f64 {
    const es = getF(this.esScrape.dataStart, s);
    return ownPrice(<f64>n, es, es / getF(this.slots.dataStart, s), getF(this.adj.dataStart, s * ADJ_STRIDE));
  }

  /**
   * The pile of our outstanding requests to slot s against what its norm explains (Little's law):
   * at its usual whole time L (allRef; before any answer the scraped E[S]) and our send rate λ,
   * about λ·L of ours are outstanding; (n + 1) / (λ·L + 1) is the latency the pile says over the
   * usual one, in peak EWMA's form (latency × (outstanding + 1)) but not divided by c. An instance
   * that stops answering raises it with every request sent there and, once we stop sending, as λ
   * fades: it prices a slowdown before any answer comes. 1 with nothing outstanding. No noise
   * band (one deviation √(λ·L) left out lost the 4-proxy case its signal: docs/inband.md).
   */
  pile(s: i32): f64 { return this.pileOf(s, getI(this.outN.dataStart, s)); }

  /**
   * What an error answer of slot s costs, over its own scraped E[S] (levelError): a retry at a
   * usual instance of the service at its usual price -- its E[S] (esTyp), the fairN of ours it
   * usually holds at E[S]/c each and their own price: each of ours at one E[S] in all. At c = 1 a usual peer costs ~6 E[S] at rho 0.85: a black hole priced
   * at e / (1 − e) × its own 2 ms answers (or the usual E[S] alone) stayed cheaper than a loaded
   * peer and took ~250 requests per 15 s episode (87 before the pile made loaded peers dearer).
   */
  errScale(s: i32): f64 {
    const es = getF(this.esScrape.dataStart, s);
    const typ = getF(this.esTyp.dataStart, s);
    if (!(es > 0) || !(typ > 0)) return 1;
    // the proxy's share (fairN is this VM's): the backlog a retry meets holds every VM's requests
    const n = (getF(this.fairN.dataStart, s) < Infinity ? getF(this.fairN.dataStart, s) : 0) * this.vms, c = getF(this.slots.dataStart, s);
    return (typ * (1 + n / c) + ownPrice(n, typ, typ / c, 1)) / es; // = typ (1 + n) / es
  }

  /**
   * The pile at n outstanding: its λ·L is at most the service's rate-weighted mean (fairN), so an
   * instance taking more than its share of our requests holds more than a usual one and is dearer
   * by (n + 1) / (mean + 1) -- peak EWMA's (pending + 1) load feedback, which does not vanish at
   * large c: without it an instance's share at c = 1000 was set by the rank of its static price
   * (the recovered one of the Linkerd case came back at 0.7x its fair share).
   */
  @inline pileOf(s: i32, n: i32): f64 { return pileAt(this, s, n); }

  /**
   * Tick: every slot's send rate, then its factor at `now` (only the `live` ones when given:
   * Inflight.liveList, so the tick costs the live fleet, not every slot ever allocated).
   */
  fuseAll(now: f64, live: Array<i32> | null = null): void {
    this.nowMs = now;
    const dt = this.rateAt >= 0 ? now - this.rateAt : 0;
    this.rateAt = now;
    const nk = live != null ? live.length : this.gen.length;
    for (let k = 0; k < nk; k++) {
      const s = live != null ? unchecked(live[k]) : k;
      if (s >= this.gen.length) continue;
      if (dt > 0) {
        // over the usual whole time L: the requests outstanding now were sent within about L, so
        // the rate they are compared with is the rate over L (over a longer τ the rate lagged a
        // ramp-up: a recovered instance taking traffic again looked piled up and stayed out)
        const L = this.allRef[s] > 0 ? this.allRef[s] : this.esScrape[s];
        const w = Math.exp(-dt / (L > 0 ? L : this.paramsOf[s].tauMs));
        this.rate[s] = this.rate[s] * w + (<f64>this.sends[s] / dt) * (1 - w);
        this.sends[s] = 0;
      }
    }
    fairShares(this, live);
    for (let k = 0; k < nk; k++) {
      const s = live != null ? unchecked(live[k]) : k;
      if (s < this.gen.length) this.fuse(s, now);
    }
  }

  /** Merges the shared document (worker VMs) and returns the one to write back: inband-share.ts. */
  merge(doc: ArrayBuffer, addrs: Array<string>, slotOf: (a: string) => i32, live: Array<i32> | null = null): ArrayBuffer {
    return mergeShared(this, doc, addrs, slotOf, live);
  }
}
