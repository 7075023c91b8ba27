// The next-best instances after a pick, cheapest first: the ordered list Envoy's override_host
// load-balancing policy walks when the first host fails (a retry takes the next listed host that is
// an endpoint of the cluster; when the list runs out, the fallback policy picks). The order is the
// one the pick itself used — plan.cost, the expected time in system — so a retry goes where the
// request would have gone had the pick not been there. Remote instances (another cloud, reached
// through ORIGINAL_DST at a gateway address) are never listed: they are no endpoints of the local
// cluster, and override_host would skip them anyway.
import { Plan } from "./plan";
import { ptr, f64At, setF64At, i32At } from "./flat";
import { SKIP_NONE } from "./skip";
import { inbandQueue } from "./scorer-inband";
import { priceOf } from "./scorer-wait";

/** Most fallbacks a request carries: a retry budget beyond this is the fallback policy's. */
export const MAX_FALLBACKS: i32 = 8;

/**
 * Prices every candidate into plan.cost as the full scoring pass would (scoreAll), but counts no
 * skip: for a pick decided on the O(1) path, which scored only its two draws. Left out (+Inf):
 * statically skipped, stale at nowMs, or saturated right now (no free slot while hot).
 */
export function priceAll(plan: Plan, inflightP: usize, nowMs: f64, adjP: usize = 0): void {
  const n = plan.n;
  const skipP = ptr(plan.skip), slotP = ptr(plan.slot), staleP = ptr(plan.staleAtMs), qP = ptr(plan.qAdj);
  const bwP = ptr(plan.bw), pwP = ptr(plan.pw), satP = ptr(plan.satAt), costP = ptr(plan.cost);
  for (let i = 0; i < n; i++) {
    if (i32At(skipP, i) != SKIP_NONE || nowMs >= f64At(staleP, i)) { setF64At(costP, i, Infinity); continue; }
    const slot = i32At(slotP, i);
    let b = inbandQueue(adjP, slot, f64At(qP, i)) + <f64>i32At(inflightP, slot);
    if (b < 0) b = 0;
    if (b >= f64At(satP, i)) { setF64At(costP, i, Infinity); continue; }
    setF64At(costP, i, priceOf(f64At(bwP, i), f64At(pwP, i), b, adjP, slot));
  }
}

/**
 * Up to `max` (<= MAX_FALLBACKS) candidates other than `first`, in increasing plan.cost (+Inf: left
 * out), local instances only (plan.remote 0), into `out`; returns how many. Ties keep the plan's
 * order. O(n·max): max is small, and this runs only for services configured with fallbacks.
 */
export function rankFallbacks(plan: Plan, first: i32, max: i32, out: StaticArray<i32>): i32 {
  const n = plan.n;
  const costP = ptr(plan.cost);
  let k = 0;
  const limit = max < out.length ? max : out.length;
  let lastCost = -Infinity;
  let lastIndex = -1;
  while (k < limit) {
    let best = -1;
    let bestCost = Infinity;
    for (let i = 0; i < n; i++) {
      if (i == first || unchecked(plan.remote[i]) != 0) continue;
      const c = f64At(costP, i);
      if (!(c < Infinity)) continue;
      // strictly after the previous one in (cost, index) order
      if (c < lastCost || (c == lastCost && i <= lastIndex)) continue;
      if (c < bestCost) { bestCost = c; best = i; }
    }
    if (best < 0) break;
    unchecked(out[k++] = best);
    lastCost = bestCost;
    lastIndex = best;
  }
  return k;
}
