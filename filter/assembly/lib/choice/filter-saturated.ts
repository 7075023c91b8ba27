// Filter, per request: saturation. An instance is saturated when ρ >= maxUtilization (windowed,
// fixed per snapshot as the threshold satAt = slots, else +Inf) *and* it has no free slot by our
// live estimate (backlog >= slots). Saturated instances are left out only when another instance
// has a free slot; when every eligible one is saturated, none is (the all-ineligible policy
// applies); in between they stay in the ranking (docs/architecture-choice.md).
import { Plan, Scan } from "./plan";
import { backlogAt } from "./scorer-wait";
import { SKIP_SATURATED } from "./skip";
import { ptr, f64At, setF64At, i32At } from "./flat";
import { inbandFactor, PRICED_OUT } from "./scorer-inband";

/** satAt for a candidate: slots when ρ is at or above the limit (compared in f32, as sent), else +Inf. */
export function saturationThreshold(rho: f64, maxUtilization: f64, slots: f64): f64 {
  return !(<f32>rho < <f32>maxUtilization) ? slots : Infinity;
}

@inline export function saturatedAt(plan: Plan, i: i32, backlog: f64): bool { return backlog >= f64At(ptr(plan.satAt), i); }

/**
 * Applies the saturation rule to a scan (plan.cost: +Inf = out). Rare: only runs when the scan
 * found a saturated candidate.
 */
export function dropSaturated(plan: Plan, inflightP: usize, scan: Scan, adjP: usize = 0): void {
  if (scan.saturated == 0) return;
  const n = plan.n;
  const costP = ptr(plan.cost), satP = ptr(plan.satAt), slotsP = ptr(plan.slots);
  let freeNonSat = 0;
  if (scan.saturated < scan.eligible) {
    for (let i = 0; i < n; i++) {
      if (f64At(costP, i) == Infinity) continue;
      // not hot (satAt +Inf), a slot free, and not priced out by in-band evidence: a black hole
      // answers at once, so it always has a free slot -- counted, it made every hot peer drop
      // out and took the request whatever its error price (c = 1 and 4 at rho 0.85: 80-250
      // errors per 15 s episode instead of a handful)
      if (f64At(satP, i) == Infinity && backlogAt(plan, inflightP, i, adjP) < f64At(slotsP, i)
        && inbandFactor(adjP, i32At(ptr(plan.slot), i)) < PRICED_OUT) freeNonSat++;
    }
  }
  if (scan.saturated < scan.eligible && freeNonSat == 0) return;
  let best = Infinity;
  for (let i = 0; i < n; i++) {
    const c = f64At(costP, i);
    if (c == Infinity) continue;
    if (backlogAt(plan, inflightP, i, adjP) >= f64At(satP, i)) setF64At(costP, i, Infinity);
    else if (c < best) best = c;
  }
  unchecked(plan.skipped[SKIP_SATURATED] += scan.saturated);
  scan.eligible -= scan.saturated;
  scan.best = best;
}
