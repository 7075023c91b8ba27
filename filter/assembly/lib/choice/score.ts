// The full scoring pass: the stale filter and the wait scorer over every candidate, into plan.cost
// (+Inf: left out, with the reason counted). Runs for the band picker, and for p2c when its O(1)
// path cannot decide. This loop runs over every instance: the per-candidate stage tests
// (staleAt, backlogAt, costAt, saturatedAt) are written inline on raw pointers (flat.ts).
import { Plan, Scan } from "./plan";
import { anyStale, leftOutAt } from "./filter-stale";
import { ptr, f64At, setF64At, i32At } from "./flat";
import { inbandQueue } from "./scorer-inband";
import { priceOf } from "./scorer-wait";

export function scoreAll(plan: Plan, inflightP: usize, nowMs: f64, adjP: usize = 0): Scan {
  const n = plan.n;
  const checkStale = anyStale(plan, nowMs);
  const skipP = ptr(plan.skip), slotP = ptr(plan.slot), staleP = ptr(plan.staleAtMs), qP = ptr(plan.qAdj);
  const bwP = ptr(plan.bw), pwP = ptr(plan.pw), satP = ptr(plan.satAt), costP = ptr(plan.cost);
  const skippedP = ptr(plan.skipped);
  let best = Infinity;
  let eligible = 0;
  let saturated = 0;
  for (let i = 0; i < n; i++) {
    if (leftOutAt(skipP, staleP, skippedP, costP, checkStale, nowMs, i)) continue;
    const slot = i32At(slotP, i);
    let b = inbandQueue(adjP, slot, f64At(qP, i)) + <f64>i32At(inflightP, slot);
    if (b < 0) b = 0;
    const c = priceOf(f64At(bwP, i), f64At(pwP, i), b, adjP, slot);
    setF64At(costP, i, c);
    eligible++;
    if (c < best) best = c;
    if (b >= f64At(satP, i)) saturated++;
  }
  const s = plan.scan;
  s.eligible = eligible;
  s.saturated = saturated;
  s.best = best;
  return s;
}
