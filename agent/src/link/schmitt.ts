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
// Cooldown (minimum dwell time in `degraded`, `cooldownMs`): degraded -> normal happens only
// when at least cooldownMs have passed since the link became degraded (sample times come in as
// `nowMs`). A recovery whose streak is complete earlier is held; the recover streak keeps
// counting, so it happens on the first low sample after the cooldown. normal -> degraded is
// NEVER held: a cooldown there would send traffic over a line known to be slow for up to
// cooldownMs after every recovery (measured: reaction p99 ~1 s instead of < 200 ms). Each
// flap cycle therefore keeps traffic local for at least cooldownMs. 0 = no cooldown.
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
  /** minimum dwell time in degraded before a recovery, ms (0 or absent = none) */
  cooldownMs?: number;
}

export interface SchmittState {
  readonly state: LinkState;
  readonly degradeStreak: number;
  readonly recoverStreak: number;
  /** time of the last transition (-Infinity before the first) */
  readonly lastChangeAtMs: number;
}

export interface SchmittStep {
  next: SchmittState;
  changed: boolean;
  sampleClass: SampleClass;
  /** the recover streak was complete but the cooldown held the recovery */
  held: boolean;
}

const STREAK_MAX = 1_000_000_000;

export function initialSchmitt(state: LinkState = 'degraded'): SchmittState {
  return { state, degradeStreak: 0, recoverStreak: 0, lastChangeAtMs: -Infinity };
}

export function classify(sampleMs: number | null, cfg: SchmittConfig): SampleClass {
  if (sampleMs === null || Number.isNaN(sampleMs) || sampleMs >= cfg.degradeThresholdMs) return 'high';
  if (sampleMs < cfg.recoverThresholdMs) return 'low';
  return 'mid';
}

export function step(s: SchmittState, sampleMs: number | null, cfg: SchmittConfig, nowMs = 0): SchmittStep {
  const sampleClass = classify(sampleMs, cfg);
  let { degradeStreak, recoverStreak } = s;
  let want = s.state;
  switch (sampleClass) {
    case 'high':
      degradeStreak = Math.min(degradeStreak + 1, STREAK_MAX);
      recoverStreak = 0;
      // in state degraded, want = 'degraded' is no change
      if (degradeStreak >= cfg.degradeAfter) want = 'degraded';
      break;
    case 'low':
      recoverStreak = Math.min(recoverStreak + 1, STREAK_MAX);
      degradeStreak = 0;
      // in state normal, want = 'normal' is no change
      if (recoverStreak >= cfg.recoverAfter) want = 'normal';
      break;
    case 'mid':
      degradeStreak = 0;
      recoverStreak = 0;
      break;
  }
  const held = want === 'normal' && s.state === 'degraded' && nowMs - s.lastChangeAtMs < (cfg.cooldownMs ?? 0);
  const changed = want !== s.state && !held;
  const next: SchmittState = {
    state: changed ? want : s.state,
    degradeStreak,
    recoverStreak,
    lastChangeAtMs: changed ? nowMs : s.lastChangeAtMs,
  };
  return { next, changed, sampleClass, held };
}

/** Convenience for tests and tools: fold a sequence of samples, one every `intervalMs` from t = 0. */
export function run(samples: Array<number | null>, cfg: SchmittConfig, init: SchmittState = initialSchmitt(), intervalMs = 100): SchmittState[] {
  const out: SchmittState[] = [];
  let s = init;
  samples.forEach((x, i) => {
    s = step(s, x, cfg, i * intervalMs).next;
    out.push(s);
  });
  return out;
}
