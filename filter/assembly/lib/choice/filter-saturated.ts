// Filter, per request: saturation. An instance is saturated when ρ >= maxUtilization (windowed,
// fixed per snapshot as the threshold satAt = slots, else +Inf) *and* it has no free slot by our
// live estimate (backlog >= slots). Saturated instances are left out only when another instance
// has a free slot; in between they stay in the ranking (docs/architecture-choice.md). When every
// eligible one is saturated they are all left out (the all-ineligible policy applies) -- unless
// the caller asks for the overflow rule (`overflow`: the load-independent pick, when the
// all-ineligible policy would forward the request, not shed it), below.
import { Plan, Scan } from "./plan";
import { backlogAt, backlogOf, priceOf } from "./scorer-wait";
import { SKIP_SATURATED, SKIP_SLOW } from "./skip";
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
export function dropSaturated(plan: Plan, inflightP: usize, scan: Scan, adjP: usize = 0, nowMs: f64 = 0, overflow: bool = false): void {
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
  if (scan.saturated == scan.eligible && overflow) { overflowTo(plan, inflightP, scan, adjP, nowMs); return; }
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

/**
 * Every eligible instance saturated, and the request is to be forwarded, not shed: the saturated
 * ones stay in the ranking and the instances left out by their P99 alone (SKIP_SLOW, not stale)
 * come back at their price without the health weight -- the scraped E[S] (an episode's, while the
 * agent's window holds it) and queue, times the in-band factor (a verdict this proxy saw prices a
 * 10x instance at ~10x). Forwarded degraded, the regular cluster's LEAST_REQUEST sent the
 * overflow to the skipped instance blind, because it had the fewest requests in flight: a 10x
 * slower one during a c = 1 slowdown (13 requests in 0.2 s; docs/benchmarks/robust-r8b.md), none
 * of it counted in our in-flight table or the pile. Keeping the saturated ones alone closed that
 * valve also after the episode, when the skipped instance is empty and back to normal: the seven
 * others at rho 0.97 queued for seconds (one path of 32: P99 1.6 s -> 6.2 s, robust-r9.md).
 */
function overflowTo(plan: Plan, inflightP: usize, scan: Scan, adjP: usize, nowMs: f64): void {
  const n = plan.n;
  const costP = ptr(plan.cost), skipP = ptr(plan.skip), slotP = ptr(plan.slot);
  const staleP = ptr(plan.staleAtMs), baseP = ptr(plan.ovBase), perP = ptr(plan.ovPer), qP = ptr(plan.ovQ);
  let best = scan.best;
  for (let i = 0; i < n; i++) {
    if (i32At(skipP, i) != SKIP_SLOW || nowMs >= f64At(staleP, i)) continue;
    const slot = i32At(slotP, i); // the queue is finite: snapshot.ts refuses any other
    const c = priceOf(f64At(baseP, i), f64At(perP, i), backlogOf(adjP, slot, f64At(qP, i), inflightP), adjP, slot);
    if (!(c < Infinity)) continue;
    setF64At(costP, i, c);
    scan.eligible++;
    if (c < best) best = c;
  }
  scan.best = best;
}
