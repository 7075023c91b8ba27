// Picker for critical requests: the cheapest instance among those that would still admit a
// standard request (its pressure under the standard shedding threshold), else the cheapest. Cost
// prices the request's own service and the backlog beyond the inferred slots, but a KV cache near
// full queues a new request whatever the slot count says (vLLM admits a waiting request only when
// blocks free up, FIFO): a critical request goes where the shedding keeps room.
import { Pick, Plan } from "./plan";
import { ptr, f64At } from "./flat";

/** `stdLoadOf[i]` (valid where plan.cost[i] is finite): candidate i's pressure as a multiple of its standard threshold. p.index −1: none is under it. */
export function calmPick(plan: Plan, stdLoadOf: StaticArray<f64>, drainOf: StaticArray<u8>, p: Pick): void {
  const n = plan.n;
  const costP = ptr(plan.cost);
  let best = Infinity;
  let k = -1;
  let considered = 0;
  for (let i = 0; i < n; i++) {
    const c = f64At(costP, i);
    if (c == Infinity || !(unchecked(stdLoadOf[i]) < 1) || unchecked(drainOf[i]) != 0) continue;
    considered++;
    if (c < best) { best = c; k = i; }
  }
  p.considered = considered;
  p.index = k;
}
