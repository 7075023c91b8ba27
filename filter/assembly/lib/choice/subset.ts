// The Gateway API Inference Extension's endpoint subset (x-gateway-destination-endpoint-subset: a
// comma-separated list of ip:port): a gateway that knows which endpoints of the pool may serve a
// request restricts the pick to them. The subset only ever narrows the candidates, which are the
// service's instances in the snapshot: an address in the list that is no candidate is ignored,
// so the header cannot aim the pick outside the pool. When the subset leaves no eligible
// candidate the request is not placed elsewhere (the protocol's answer is a 503).
import { Plan, Scan } from "./plan";
import { ptr, f64At, setF64At } from "./flat";

/**
 * Marks in `mask` (length >= plan.n, 1 = in the subset) the candidates whose address is listed in
 * `list` (entries separated by ',', surrounding spaces ignored); returns how many are marked.
 */
export function subsetMask(plan: Plan, list: string, mask: StaticArray<u8>): i32 {
  const n = plan.n;
  for (let i = 0; i < n; i++) unchecked(mask[i] = 0);
  let marked = 0;
  let start = 0;
  const len = list.length;
  while (start <= len) {
    let end = list.indexOf(",", start);
    if (end < 0) end = len;
    let a = start, b = end;
    while (a < b && list.charCodeAt(a) == 0x20) a++;
    while (b > a && list.charCodeAt(b - 1) == 0x20) b--;
    if (b > a) {
      const entry = list.substring(a, b);
      for (let i = 0; i < n; i++) {
        if (unchecked(mask[i]) == 0 && unchecked(plan.addr[i]) == entry) { unchecked(mask[i] = 1); marked++; }
      }
    }
    start = end + 1;
  }
  return marked;
}

/**
 * Applies a subset to a scored plan (plan.cost: +Inf = out): candidates outside it are priced out
 * and the scan's eligible count and best cost recomputed. Not counted as a skip: the gateway's
 * choice, not the instance's state.
 */
export function applySubset(plan: Plan, scan: Scan, mask: StaticArray<u8>): void {
  const n = plan.n;
  const costP = ptr(plan.cost);
  let eligible = 0;
  let best = Infinity;
  for (let i = 0; i < n; i++) {
    if (unchecked(mask[i]) == 0) { setF64At(costP, i, Infinity); continue; }
    const c = f64At(costP, i);
    if (c < Infinity) { eligible++; if (c < best) best = c; }
  }
  scan.eligible = eligible;
  scan.best = best;
}
