// Scorer, per snapshot: the health weight. The cost is divided by it, so a lagging instance
// (P99 well above its baseline) must be that much less loaded to win.

/** 1 while P99 <= 3× baseline, then 3·baseline/P99 (so 0.8 at 3.75×, 0.5 at 6×). */
export function healthScore(p99Ms: f64, baselineMs: f64): f64 {
  if (!(baselineMs > 0) || !(p99Ms > 0)) return 1;
  const limit = 3 * baselineMs;
  return p99Ms <= limit ? 1 : limit / p99Ms;
}

/** Progressive de-weighting: >= 0.8 full weight, 0.5–0.8 weight = score, < 0.5 out (weight 0). */
export function weightFor(score: f64): f64 {
  if (score >= 0.8) return 1;
  if (score >= 0.5) return score;
  return 0;
}

/**
 * The health weight of an instance: weightFor(healthScore(p99, baseline)), or 1 when in-band
 * evidence of recovery overrides the P99 verdict (`recovered`: InbandTable.liftsSlow). The agent's
 * P99 window keeps an episode's slow completions for its whole length after the last one, and an
 * instance priced out gets too few new completions to outweigh them; fresh normal answers after a
 * slowdown this proxy saw itself are the better evidence.
 */
export function healthWeight(p99Ms: f64, baselineMs: f64, recovered: bool): f64 {
  return recovered ? 1 : weightFor(healthScore(p99Ms, baselineMs));
}
