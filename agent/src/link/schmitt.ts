// Schmitt trigger for one peer. PURE: no clocks, no I/O; (state, sample) -> state.
//
// Samples are RTTs in ms, or `null` for a failed probe (error, non-2xx, timeout), which
// counts like an RTT of +infinity.
//
//   high:  sample >= degradeThresholdMs (or failed)
//   low:   sample <  recoverThresholdMs
//   mid:   recoverThresholdMs <= sample < degradeThresholdMs
//
// Rules
//   * normal -> degraded after `degradeAfter` (K) CONSECUTIVE high samples.
//   * degraded -> normal after `recoverAfter` (N) CONSECUTIVE low samples.
//   * A mid sample resets the recover streak AND the degrade streak: it is not "bad enough"
//     to count toward degrading, and it breaks the run of consecutive high samples
//     ("K consecutive samples >= threshold" is taken literally). It changes no state.
//   * A high sample resets the recover streak; a low sample resets the degrade streak.
//   * Both streaks are counted in both states (the snapshot publishes recoverStreak
//     whatever the state); they saturate at a large number.
//
// Initial state: `degraded` with both streaks at 0, so a peer only becomes `normal` after N
// consecutive good samples. Rationale: the data plane's fail mode defaults to "degraded"
// (an unknown/stale link is treated as degraded); the agent, at boot, knows as little about
// the link as a stale snapshot does, so claiming `normal` before evidence would route
// cross-cloud on a link that may be the reason we restarted. The price is a start-up delay
// of about N x intervalMs (1 s with the defaults) before cross-cloud routing is allowed.
// `initialState: normal` can be configured per peer for those who prefer the other risk.

export type LinkState = 'normal' | 'degraded';
export type SampleClass = 'high' | 'mid' | 'low';

export interface SchmittConfig {
  degradeThresholdMs: number;
  degradeAfter: number;
  recoverThresholdMs: number;
  recoverAfter: number;
}

export interface SchmittState {
  readonly state: LinkState;
  readonly degradeStreak: number;
  readonly recoverStreak: number;
}

export interface SchmittStep {
  next: SchmittState;
  changed: boolean;
  sampleClass: SampleClass;
}

const STREAK_MAX = 1_000_000_000;

export function initialSchmitt(state: LinkState = 'degraded'): SchmittState {
  return { state, degradeStreak: 0, recoverStreak: 0 };
}

export function classify(sampleMs: number | null, cfg: SchmittConfig): SampleClass {
  if (sampleMs === null || Number.isNaN(sampleMs) || sampleMs >= cfg.degradeThresholdMs) return 'high';
  if (sampleMs < cfg.recoverThresholdMs) return 'low';
  return 'mid';
}

export function step(s: SchmittState, sampleMs: number | null, cfg: SchmittConfig): SchmittStep {
  const sampleClass = classify(sampleMs, cfg);
  let { state, degradeStreak, recoverStreak } = s;
  switch (sampleClass) {
    case 'high':
      degradeStreak = Math.min(degradeStreak + 1, STREAK_MAX);
      recoverStreak = 0;
      if (state === 'normal' && degradeStreak >= cfg.degradeAfter) state = 'degraded';
      break;
    case 'low':
      recoverStreak = Math.min(recoverStreak + 1, STREAK_MAX);
      degradeStreak = 0;
      if (state === 'degraded' && recoverStreak >= cfg.recoverAfter) state = 'normal';
      break;
    case 'mid':
      degradeStreak = 0;
      recoverStreak = 0;
      break;
  }
  return { next: { state, degradeStreak, recoverStreak }, changed: state !== s.state, sampleClass };
}

/** Convenience for tests and tools: fold a sequence of samples. */
export function run(samples: Array<number | null>, cfg: SchmittConfig, init: SchmittState = initialSchmitt()): SchmittState[] {
  const out: SchmittState[] = [];
  let s = init;
  for (const x of samples) {
    s = step(s, x, cfg).next;
    out.push(s);
  }
  return out;
}
