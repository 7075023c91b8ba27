// Picker: power of two choices. Two distinct eligible candidates at random, the cheaper one:
// robust when many proxies decide at once on the same data, since they do not all converge on one
// "best". Draws are uniform, not by capacity c/E[S]: measured in bench/routing, capacity-weighted
// draws gained little on mixed fleets, nothing on near-equal ones and lost with 4 proxies
// (docs/benchmarks.md).
import { Rng } from "../inflight";
import { Pick, Plan } from "./plan";
import { drawFirst, drawSecond } from "./draw";
import { anyStale } from "./filter-stale";
import { saturatedAt } from "./filter-saturated";
import { backlogAt, costAt } from "./scorer-wait";
import { ptr, f64At } from "./flat";

/**
 * O(1) p2c: draws two of the statically eligible candidates and scores only those. Valid while no
 * data can be stale and neither drawn candidate is saturated right now; otherwise returns false
 * and the full run decides (the saturation rule depends on every instance's free slots; rejecting
 * such pairs keeps the draw uniform over the others).
 */
export function p2cFast(plan: Plan, inflightP: usize, nowMs: f64, rng: Rng, p: Pick, adjP: usize = 0): bool {
  const m = plan.nElig;
  if (m < 2 || anyStale(plan, nowMs)) return false;
  const ka = drawFirst(rng, m);
  const kb = drawSecond(rng, m, ka);
  const ia = unchecked(plan.elig[ka]);
  const ib = unchecked(plan.elig[kb]);
  const ba = backlogAt(plan, inflightP, ia, adjP);
  const bb = backlogAt(plan, inflightP, ib, adjP);
  if (saturatedAt(plan, ia, ba) || saturatedAt(plan, ib, bb)) return false;
  p.index = costAt(plan, ib, bb, adjP) < costAt(plan, ia, ba, adjP) ? ib : ia;
  p.eligible = m;
  p.considered = 2;
  return true;
}

/** p2c over a scored plan (plan.cost: +Inf = out) with `eligible` >= 1 candidates left. */
export function p2cScored(plan: Plan, eligible: i32, rng: Rng, p: Pick): void {
  if (eligible == 1) { p.index = nthEligible(plan, 0); p.considered = 1; return; }
  const a = drawFirst(rng, eligible);
  const b = drawSecond(rng, eligible, a);
  const ia = nthEligible(plan, a);
  const ib = nthEligible(plan, b);
  const costP = ptr(plan.cost);
  p.index = f64At(costP, ib) < f64At(costP, ia) ? ib : ia;
  p.considered = 2;
}

/** Index of the k-th (0-based) candidate with a finite cost. */
function nthEligible(plan: Plan, k: i32): i32 {
  const costP = ptr(plan.cost);
  const n = plan.n;
  for (let i = 0; i < n; i++) {
    if (f64At(costP, i) < Infinity) {
      if (k == 0) return i;
      k--;
    }
  }
  return -1;
}
