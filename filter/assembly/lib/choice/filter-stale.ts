// Filter, per request: an instance whose data (scraped at generatedAt − dataAgeMs) is older than the
// service's stalenessMs is left out. The plan keeps the earliest expiry, so until then the check
// costs one compare per request, not one per instance.
import { Plan } from "./plan";
import { ptr, f64At } from "./flat";

/** Whether some candidate's data may be stale at nowMs. */
@inline export function anyStale(plan: Plan, nowMs: f64): bool { return nowMs >= plan.minStaleAtMs; }

@inline export function staleAt(plan: Plan, i: i32, nowMs: f64): bool { return nowMs >= f64At(ptr(plan.staleAtMs), i); }
