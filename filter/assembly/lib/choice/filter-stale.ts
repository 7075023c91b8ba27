// Filter, per request: an instance whose data (scraped at generatedAt − dataAgeMs) is older than the
// service's stalenessMs is left out. The plan keeps the earliest expiry, so until then the check
// costs one compare per request, not one per instance.
import { Plan } from "./plan";
import { ptr, f64At, i32At, setF64At } from "./flat";
import { SKIP_NONE, SKIP_STALE } from "./skip";

/** Whether some candidate's data may be stale at nowMs. */
@inline export function anyStale(plan: Plan, nowMs: f64): bool { return nowMs >= plan.minStaleAtMs; }

@inline export function staleAt(plan: Plan, i: i32, nowMs: f64): bool { return nowMs >= f64At(ptr(plan.staleAtMs), i); }

/**
 * The scoring passes' gate for candidate i: its plan-time skip reason, or stale when `checkStale`
 * and its data expired by nowMs. A candidate left out is counted under its reason
 * (plan.skipped, at skippedP) and priced +Inf (at costP); returns whether it was left out.
 */
@inline export function leftOutAt(skipP: usize, staleP: usize, skippedP: usize, costP: usize, checkStale: bool, nowMs: f64, i: i32): bool {
  let skip = i32At(skipP, i);
  if (checkStale && skip == SKIP_NONE && nowMs >= f64At(staleP, i)) skip = SKIP_STALE;
  if (skip == SKIP_NONE) return false;
  const at = skippedP + (<usize>skip << 3);
  store<i64>(at, load<i64>(at) + 1);
  setF64At(costP, i, Infinity);
  return true;
}
