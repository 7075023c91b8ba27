// Probing loop + Schmitt trigger + RTT bookkeeping for one peer.
//
// * Every intervalMs a probe starts, whether or not earlier ones finished (overlap allowed),
//   unless `maxInFlight` (default 4) probes are already in flight: then that tick is skipped
//   (counted in switchyard_probe_skipped_total). The in-flight probes will all yield samples.
// * Each probe yields exactly ONE Schmitt sample:
//     - completes before degradeThresholdMs -> its RTT (ok), or a failure (error/http_error);
//     - still unanswered when degradeThresholdMs passes -> a "slow" (high) sample AT THAT
//       MOMENT (timer), without waiting for the answer; its later completion/timeout only
//       updates lastRtt/EWMA/histogram and is NOT counted again;
//     - timeout before the threshold (timeoutMs < degradeThresholdMs) -> failed sample.
// * lastRttMs: RTT of the most recent probe (by start order) that reported; a slow sample
//   sets it to the elapsed time so far (a lower bound) until the real RTT arrives; NaN when
//   the latest probe failed. avgRttMs: EWMA (alpha 0.2) of successful RTTs only (failures do
//   not move it; lastRttMs = NaN says it failed). Both NaN before the first result.
// * Starvation guard (starvation.ts, `starvationGuard`, default on): a sample at or above the
//   threshold (or a timeout) that the agent's own event-loop lateness during the probe could
//   explain is not fed to the Schmitt trigger; it is emitted as a sample of kind 'starved' with
//   counted: false. A probe still unanswered at the threshold timer while the agent was stalled
//   is re-checked once the stalled time is made up, so a slow line is still caught.
// * Cooldown (`cooldownMs`): the Schmitt trigger holds a transition until cooldownMs after the
//   previous one (schmitt.ts).
import { EventEmitter } from 'node:events';
import type { PeerConfig } from '../config';
import type { PeerRecord } from '../snapshot/codec';
import { createProber, type Prober, type ProbeResult } from './probe';
import { classify, initialSchmitt, step, type LinkState, type SampleClass, type SchmittState } from './schmitt';
import { acquireLatenessMonitor, judgeSlowSample, nextCheckInMs, releaseLatenessMonitor, type LatenessMonitor, type LatenessSource } from './starvation';

export const EWMA_ALPHA = 0.2;

export type SampleKind = 'ok' | 'slow' | 'error' | 'http_error' | 'timeout' | 'starved';

export interface SampleEvent {
  peer: string;
  probeId: number;
  kind: SampleKind;
  /** value fed to the Schmitt trigger (null = failed); for 'starved', the measured value (not fed) */
  valueMs: number | null;
  /** false for 'starved' samples: the Schmitt trigger did not see it */
  counted: boolean;
  /** ms the agent's event loop was stalled during this probe */
  stalledMs: number;
  /** ms from probe start to this sample */
  elapsedMs: number;
  sampleClass: SampleClass;
  state: LinkState;
  degradeStreak: number;
  recoverStreak: number;
  atMs: number;
}

export interface StateEvent {
  peer: string;
  from: LinkState;
  to: LinkState;
  probeId: number;
  sampleKind: SampleKind;
  sampleElapsedMs: number;
  atMs: number;
}

export interface ProbeEndEvent {
  peer: string;
  probeId: number;
  result: ProbeResult;
  /** true if the sample had already been counted by the threshold timer */
  late: boolean;
}

export interface PeerMonitorEvents {
  sample: [SampleEvent];
  state: [StateEvent];
  'probe-start': [{ peer: string; probeId: number; inFlight: number }];
  'probe-end': [ProbeEndEvent];
  skip: [{ peer: string; inFlight: number }];
}

export interface PeerMonitorOptions {
  /** tests: a fake prober */
  prober?: Prober;
  /** tests: injected lateness; default the process-wide LatenessMonitor */
  lateness?: LatenessSource;
}

export class PeerMonitor extends EventEmitter<PeerMonitorEvents> {
  readonly name: string;
  private schmitt: SchmittState;
  private prober: Prober;
  private lateness?: LatenessSource;
  private ownsLateness = false;
  private readonly injectedLateness?: LatenessSource;
  private ticker?: NodeJS.Timeout;
  private inFlight = new Map<number, { abort: AbortController; slowTimer?: NodeJS.Timeout }>();
  private nextProbeId = 1;
  private lastRttProbeId = 0;
  private stopped = false;
  lastRttMs = NaN;
  avgRttMs = NaN;
  lastSampleAtMs = 0;

  constructor(readonly cfg: PeerConfig, opts: PeerMonitorOptions = {}) {
    super();
    this.name = cfg.name;
    this.schmitt = initialSchmitt(cfg.initialState);
    this.prober = opts.prober ?? createProber(cfg.probe, cfg.timeoutMs, cfg.maxInFlight);
    this.injectedLateness = opts.lateness;
  }

  private get guard(): boolean {
    return this.cfg.starvationGuard !== false;
  }

  get state(): LinkState {
    return this.schmitt.state;
  }
  get streaks(): SchmittState {
    return this.schmitt;
  }
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  start(): void {
    if (this.ticker || this.stopped) return;
    if (this.guard) {
      this.lateness = this.injectedLateness;
      if (!this.lateness) {
        this.lateness = acquireLatenessMonitor();
        this.ownsLateness = true;
      }
    }
    this.tick();
    this.ticker = setInterval(() => this.tick(), this.cfg.intervalMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = undefined;
    for (const p of this.inFlight.values()) {
      clearTimeout(p.slowTimer);
      p.abort.abort();
    }
    this.inFlight.clear();
    this.prober.close();
    if (this.ownsLateness) releaseLatenessMonitor(this.lateness as LatenessMonitor);
    this.ownsLateness = false;
  }

  record(): PeerRecord {
    return {
      name: this.name,
      state: this.schmitt.state,
      lastRttMs: this.lastRttMs,
      avgRttMs: this.avgRttMs,
      recoverStreak: this.schmitt.recoverStreak,
      lastSampleAtMs: this.lastSampleAtMs,
    };
  }

  private tick(): void {
    if (this.stopped) return;
    if (this.inFlight.size >= this.cfg.maxInFlight) {
      this.emit('skip', { peer: this.name, inFlight: this.inFlight.size });
      return;
    }
    const probeId = this.nextProbeId++;
    const abort = new AbortController();
    const t0 = performance.now();
    const elapsed = (): number => performance.now() - t0;
    const stalled = (): number => this.lateness?.stalledMs(t0, performance.now()) ?? 0;
    const threshold = this.cfg.degradeThresholdMs;
    const resolution = this.lateness?.resolutionMs ?? 0;
    let counted = false;
    const entry: { abort: AbortController; slowTimer?: NodeJS.Timeout } = { abort };
    this.inFlight.set(probeId, entry);
    const slowCheck = (): void => {
      entry.slowTimer = undefined;
      if (counted || this.stopped) return;
      const e = elapsed();
      const st = stalled();
      if (judgeSlowSample(e, st, threshold, resolution) === 'starved') {
        // Still unanswered, but the agent was stalled: look again once the stall is made up.
        entry.slowTimer = setTimeout(slowCheck, nextCheckInMs(e, st, threshold, resolution));
        return;
      }
      counted = true;
      this.setLastRtt(probeId, e);
      this.sample(probeId, 'slow', Math.max(e, threshold), e, st);
    };
    entry.slowTimer = setTimeout(slowCheck, threshold);
    this.emit('probe-start', { peer: this.name, probeId, inFlight: this.inFlight.size });

    this.prober.run(abort.signal).then((res) => {
      clearTimeout(entry.slowTimer);
      this.inFlight.delete(probeId);
      if (this.stopped || res.outcome === 'aborted') return;
      const late = counted;
      this.emit('probe-end', { peer: this.name, probeId, result: res, late });
      if (res.outcome === 'ok') {
        this.avgRttMs = Number.isNaN(this.avgRttMs) ? res.rttMs : EWMA_ALPHA * res.rttMs + (1 - EWMA_ALPHA) * this.avgRttMs;
        this.setLastRtt(probeId, res.rttMs);
      } else {
        this.setLastRtt(probeId, NaN);
      }
      if (late) return;
      counted = true;
      const st = stalled();
      // Slow answers and timeouts are judged: the agent's lateness only ever adds time.
      const judged = res.outcome === 'timeout' || (res.outcome === 'ok' && res.rttMs >= threshold);
      if (this.guard && judged && judgeSlowSample(res.rttMs, st, threshold, resolution) === 'starved') {
        this.starved(probeId, res.rttMs, st);
      } else if (res.outcome === 'ok') {
        this.sample(probeId, res.rttMs >= threshold ? 'slow' : 'ok', res.rttMs, res.rttMs, st);
      } else {
        this.sample(probeId, res.outcome, null, res.rttMs, st);
      }
    });
  }

  /** A sample the agent's own lateness may explain: reported, not fed to the Schmitt trigger. */
  private starved(probeId: number, elapsedMs: number, stalledMs: number): void {
    this.emit('sample', {
      peer: this.name,
      probeId,
      kind: 'starved',
      valueMs: elapsedMs,
      counted: false,
      stalledMs,
      elapsedMs,
      sampleClass: classify(elapsedMs, this.cfg),
      state: this.schmitt.state,
      degradeStreak: this.schmitt.degradeStreak,
      recoverStreak: this.schmitt.recoverStreak,
      atMs: Date.now(),
    });
  }

  /** only a probe at least as new as the one that last reported may overwrite lastRttMs */
  private setLastRtt(probeId: number, v: number): void {
    if (probeId < this.lastRttProbeId) return;
    this.lastRttProbeId = probeId;
    this.lastRttMs = v;
  }

  private sample(probeId: number, kind: SampleKind, valueMs: number | null, elapsedMs: number, stalledMs: number): void {
    const from = this.schmitt.state;
    const r = step(this.schmitt, valueMs, this.cfg, performance.now());
    this.schmitt = r.next;
    this.lastSampleAtMs = Date.now();
    this.emit('sample', {
      peer: this.name,
      probeId,
      kind,
      valueMs,
      counted: true,
      stalledMs,
      elapsedMs,
      sampleClass: r.sampleClass,
      state: r.next.state,
      degradeStreak: r.next.degradeStreak,
      recoverStreak: r.next.recoverStreak,
      atMs: this.lastSampleAtMs,
    });
    if (r.changed) {
      this.emit('state', {
        peer: this.name,
        from,
        to: r.next.state,
        probeId,
        sampleKind: kind,
        sampleElapsedMs: elapsedMs,
        atMs: this.lastSampleAtMs,
      });
    }
  }
}
