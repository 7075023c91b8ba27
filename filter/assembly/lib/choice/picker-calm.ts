// Picker for critical requests: the cheapest instance among those that would still admit a
// standard request (its pressure under the standard shedding threshold) and the instance holding
// the longest remembered prefix of the prompt while it has room (pressure under 1: KV blocks or
// slots free), never one where the request's adapter waits for a drain; else the cheapest. The
// cost prices the request's own service and the backlog beyond the inferred slots, but a KV cache
// near full queues a new request whatever the slot count says (vLLM admits a waiting request only
// when blocks free up, FIFO): a critical request goes where the shedding keeps room
// (docs/architecture-choice.md, "Shedding"). Each candidate's price adds `speedOf`: the request's
// uncached prefill at the instance's own measured rate less the pool's, where that rate stands out
// of its base model pool's spread (plan-llm.ts ownByPool; else 0). The pool's one engine model
// priced the older, slower instances of a mixed pool as fast, and long uncached critical prompts
// sent there were the critical tail at 1x and 2x (docs/benchmarks/llm-r14a.md). It adds a load
// (adapterLoadMs) where the request's adapter may have drained since the scrape (adapter-streams.ts
// mayHaveDrained: a 12 s wait for a LoRA slot, docs/benchmarks/llm-r15a.md).
import { Pick, Plan } from "./plan";
import { ptr, f64At } from "./flat";

/**
 * `stdLoadOf[i]`, `pressureOf[i]`, `drainOf[i]` (valid where plan.cost[i] is finite): candidate
 * i's pressure as a multiple of its standard threshold, its pressure, whether its adapter waits
 * there for a drain; `affinity`: the prefix holder (−1: none); `speedOf[i]` (null: none) the
 * request's own-rate prefill correction there plus the drain doubt (ms). p.index −1: none qualifies.
 */
export function calmPick(plan: Plan, stdLoadOf: StaticArray<f64>, drainOf: StaticArray<u8>, pressureOf: StaticArray<f64>, affinity: i32, p: Pick, speedOf: StaticArray<f64> | null = null): void {
  const n = plan.n;
  const costP = ptr(plan.cost);
  let best = Infinity;
  let k = -1;
  let considered = 0;
  for (let i = 0; i < n; i++) {
    let c = f64At(costP, i);
    if (speedOf != null && i < speedOf.length) c += unchecked(speedOf[i]);
    if (c == Infinity || unchecked(drainOf[i]) != 0) continue;
    // the prefix holder may be past the standard threshold (prefix affinity loads it): its cached
    // prefix is the prefill the request does not wait for (without it, critical requests' prefix
    // hit rate fell from 29–35 % at 1× to 18–22 % at 2× overload)
    if (!(unchecked(stdLoadOf[i]) < 1) && !(i == affinity && unchecked(pressureOf[i]) < 1)) continue;
    considered++;
    if (c < best) { best = c; k = i; }
  }
  p.considered = considered;
  p.index = k;
}
