// The full scoring pass: the stale filter and the wait scorer over every candidate, into plan.cost
// (+Inf: left out, with the reason counted). Runs for the band picker, and for p2c when its O(1)
// path cannot decide.
import { Plan, Scan } from "./plan";
import { SKIP_NONE, SKIP_STALE } from "./skip";
import { anyStale, staleAt } from "./filter-stale";
import { saturatedAt } from "./filter-saturated";
import { backlogAt, costAt } from "./scorer-wait";

export function scoreAll(plan: Plan, inflightP: usize, nowMs: f64): Scan {
  const s = plan.scan;
  const n = plan.n;
  const checkStale = anyStale(plan, nowMs);
  let best = Infinity;
  let eligible = 0;
  let saturated = 0;
  for (let i = 0; i < n; i++) {
    let skip = unchecked(plan.skip[i]);
    if (checkStale && skip == SKIP_NONE && staleAt(plan, i, nowMs)) skip = SKIP_STALE;
    if (skip != SKIP_NONE) {
      unchecked(plan.skipped[skip]++);
      unchecked(plan.cost[i] = Infinity);
      continue;
    }
    const b = backlogAt(plan, inflightP, i);
    const c = costAt(plan, i, b);
    unchecked(plan.cost[i] = c);
    eligible++;
    if (c < best) best = c;
    if (saturatedAt(plan, i, b)) saturated++;
  }
  s.eligible = eligible;
  s.saturated = saturated;
  s.best = best;
  return s;
}
