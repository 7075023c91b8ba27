// Load-aware instance choice (pure): the profile run. The stages, one per file in lib/choice/,
// follow the Gateway API Inference Extension scheduler's shape (docs/architecture-choice.md):
//   filters  filter-static.ts (per snapshot: unhealthy / unpriceable, link, slow)
//            filter-stale.ts, filter-saturated.ts (per request)
//   scorers  scorer-wait.ts (expected time in system), scorer-health.ts (de-weighting)
//   pickers  picker-p2c.ts (default), picker-band.ts
// The per-snapshot parts are folded into a flat plan (choice/plan.ts); per request, p2c scores
// only its two draws when it can, otherwise every candidate is scored and filtered, then picked.
import { Rng } from "./inflight";
import { Pick, Plan } from "./choice/plan";
import { scoreAll } from "./choice/score";
import { dropSaturated } from "./choice/filter-saturated";
import { p2cFast, p2cScored } from "./choice/picker-p2c";
import { bandPick } from "./choice/picker-band";
import { applySubset } from "./choice/subset";

export { SKIP_NONE, SKIP_UNHEALTHY, SKIP_SATURATED, SKIP_SLOW, SKIP_STALE, SKIP_LINK, SKIP_REASONS, skipName } from "./choice/skip";
export { MODEL_CONDITIONAL, MODEL_MG1, mg1WaitMs, mg1QueueingMs } from "./choice/scorer-wait";
export { healthScore, weightFor } from "./choice/scorer-health";
export { Candidate, candidateFrom } from "./choice/candidate";
export { Pick, Plan } from "./choice/plan";
export { MAX_FALLBACKS, priceAll, rankFallbacks } from "./choice/fallbacks";
export { subsetMask, applySubset } from "./choice/subset";

export const PICKER_P2C: i32 = 0;
export const PICKER_BAND: i32 = 1;

/**
 * Chooses an instance of `plan` (Pick.index, -1: none eligible); skips are counted in
 * plan.skipped as if every candidate had been scored. `inflight` is indexed by plan.slot, and so
 * is `inband` (InbandTable.adj: factor and queue per slot; null = no in-band correction).
 * `subset` (1 = allowed, choice/subset.ts): only those candidates may be chosen; null = all.
 */
export function pick(plan: Plan, inflight: Array<i32>, nowMs: f64, picker: i32, band: f64, rng: Rng, inband: Array<f64> | null = null,
  subset: StaticArray<u8> | null = null): Pick {
  const p = plan.result.reset();
  const inflightP = inflight.dataStart;
  const adjP: usize = inband == null ? 0 : inband.dataStart;
  if (subset == null && picker == PICKER_P2C && p2cFast(plan, inflightP, nowMs, rng, p, adjP)) {
    plan.countStaticSkips();
    return p;
  }
  const scan = scoreAll(plan, inflightP, nowMs, adjP);
  dropSaturated(plan, inflightP, scan, adjP, nowMs, !plan.shedSaturated);
  // the in-band probe knows no subset: off for a restricted pick
  if (subset != null) { applySubset(plan, scan, subset!); p.probe = false; }
  p.scored = true;
  p.eligible = scan.eligible;
  if (scan.eligible == 0) return p;
  if (picker == PICKER_P2C) p2cScored(plan, scan.eligible, rng, p);
  else bandPick(plan, scan.best, band, rng, p);
  return p;
}
