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
import { EventEmitter } from 'node:events';
import type { PeerConfig } from '../config';
import type { PeerRecord } from '../snapshot/codec';
import { createProber, type Prober, type ProbeResult } from './probe';
import { initialSchmitt, step, type LinkState, type SampleClass, type SchmittState } from './schmitt';

export const EWMA_ALPHA = 0.2;

export type SampleKind = 'ok' | 'slow' | 'error' | 'http_error' | 'timeout';

export interface SampleEvent {
  peer: string;
  probeId: number;
  kind: SampleKind;
  /** value fed to the Schmitt trigger (null = failed) */
  valueMs: number | null;
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

export class PeerMonitor extends EventEmitter<PeerMonitorEvents> {
  readonly name: string;
  private schmitt: SchmittState;
  private prober: Prober;
  private ticker?: NodeJS.Timeout;
  private inFlight = new Map<number, { abort: AbortController; slowTimer?: NodeJS.Timeout }>();
  private nextProbeId = 1;
  private lastRttProbeId = 0;
  private stopped = false;
  lastRttMs = NaN;
  avgRttMs = NaN;
  lastSampleAtMs = 0;

  constructor(readonly cfg: PeerConfig) {
    super();
    this.name = cfg.name;
    this.schmitt = initialSchmitt(cfg.initialState);
    this.prober = createProber(cfg.probe, cfg.timeoutMs, cfg.maxInFlight);
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
    this.tick();
    this.ticker = setInterval(() => this.tick(), this.cfg.intervalMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = undefined;
    for (const p of this.inFlight.values()) {
      if (p.slowTimer) clearTimeout(p.slowTimer);
      p.abort.abort();
    }
    this.inFlight.clear();
    this.prober.close();
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
    const t0 = process.hrtime.bigint();
    const elapsed = (): number => Number(process.hrtime.bigint() - t0) / 1e6;
    let counted = false;
    const entry: { abort: AbortController; slowTimer?: NodeJS.Timeout } = { abort };
    this.inFlight.set(probeId, entry);
    entry.slowTimer = setTimeout(() => {
      entry.slowTimer = undefined;
      if (counted || this.stopped) return;
      counted = true;
      const e = elapsed();
      this.setLastRtt(probeId, e);
      this.sample(probeId, 'slow', Math.max(e, this.cfg.degradeThresholdMs), e);
    }, this.cfg.degradeThresholdMs);
    this.emit('probe-start', { peer: this.name, probeId, inFlight: this.inFlight.size });

    this.prober.run(abort.signal).then((res) => {
      if (entry.slowTimer) clearTimeout(entry.slowTimer);
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
      if (res.outcome === 'ok') {
        this.sample(probeId, res.rttMs >= this.cfg.degradeThresholdMs ? 'slow' : 'ok', res.rttMs, res.rttMs);
      } else {
        this.sample(probeId, res.outcome, null, res.rttMs);
      }
    });
  }

  /** only a probe at least as new as the one that last reported may overwrite lastRttMs */
  private setLastRtt(probeId: number, v: number): void {
    if (probeId < this.lastRttProbeId) return;
    this.lastRttProbeId = probeId;
    this.lastRttMs = v;
  }

  private sample(probeId: number, kind: SampleKind, valueMs: number | null, elapsedMs: number): void {
    const from = this.schmitt.state;
    const r = step(this.schmitt, valueMs, this.cfg);
    this.schmitt = r.next;
    this.lastSampleAtMs = Date.now();
    this.emit('sample', {
      peer: this.name,
      probeId,
      kind,
      valueMs,
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
