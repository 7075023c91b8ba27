// Filter, per snapshot: the reasons that do not depend on the request (health, numbers that cannot
// be priced, the cross-cloud link, a P99 far above baseline). Decided once when the plan is built.
import { InstanceState } from "../snapshot";
import { SKIP_NONE, SKIP_UNHEALTHY, SKIP_LINK, SKIP_SLOW } from "./skip";

/**
 * Below this E[S] (ms) a service time is not believed: an exporter whose histogram sum is 0 would
 * otherwise price its instance at 0 and win every request.
 */
export const MIN_SERVICE_MS: f64 = 1e-3;

@inline function finite(x: f64): bool { return x - x == 0; } // false for NaN and ±Inf

/**
 * Whether the instance's numbers can be priced: E[S] finite and >= MIN_SERVICE_MS, queue, ρ and
 * data age finite and >= 0, slots finite. The decoder already marks such instances unhealthy
 * (reason invalid_data); this keeps the scorer safe whatever reaches it.
 */
export function priceable(s: InstanceState): bool {
  const es = <f64>s.esMs;
  const q = <f64>s.queueDepth;
  const rho = <f64>s.rho;
  const age = <f64>s.dataAgeMs;
  return finite(es) && es >= MIN_SERVICE_MS && finite(q) && q >= 0 && finite(rho) && rho >= 0 &&
    finite(age) && age >= 0 && finite(<f64>s.slots);
}

/**
 * The static skip reason of an instance with health weight `weight` (0: too slow). A degraded
 * link is reported before unpriceable numbers: a remote instance behind it gets no traffic, so
 * its E[S] is often still unknown, and the link is the reason an operator needs to see.
 */
export function staticSkip(s: InstanceState, linkDegraded: bool, weight: f64): i32 {
  if (!s.healthy) return SKIP_UNHEALTHY;
  if (linkDegraded) return SKIP_LINK;
  if (!priceable(s)) return SKIP_UNHEALTHY;
  if (weight == 0) return SKIP_SLOW;
  return SKIP_NONE;
}
