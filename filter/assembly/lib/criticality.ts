// Request criticality (critical / standard / sheddable) and the shedding rule: when the pool is
// under pressure, sheddable requests get a local 429 first, standard ones next; critical requests
// are never shed here and are sent to the cheapest instance (docs/architecture-choice.md).
export const CRIT_CRITICAL: i32 = 0;
export const CRIT_STANDARD: i32 = 1;
export const CRIT_SHEDDABLE: i32 = 2;
export const CRITICALITY_NAMES: Array<string> = ["critical", "standard", "sheddable"];

/** CRIT_* of a configured or header name; -1 when it is none of them. */
export function criticalityOf(name: string): i32 {
  if (name == "critical") return CRIT_CRITICAL;
  if (name == "standard") return CRIT_STANDARD;
  if (name == "sheddable") return CRIT_SHEDDABLE;
  return -1;
}

/** The criticality of a request: a valid header value wins (it is trusted: see docs), else the model's, else the service's. */
export function resolveCriticality(headerValue: string | null, modelDefault: i32, serviceDefault: i32): i32 {
  if (headerValue != null) {
    const h = criticalityOf(headerValue!);
    if (h >= 0) return h;
  }
  return modelDefault >= 0 ? modelDefault : serviceDefault;
}

/**
 * Whether a request of criticality `crit` is shed: `pressure` is the pressure of the instance it
 * would be sent to, `poolPressure` the least loaded eligible instance's (+Inf when none is
 * eligible). Sheddable at `sheddableAt` where it would go, standard at `standardAt` there; the
 * sheddable threshold halves while the pool's least loaded instance is at sheddableAt / 2 or
 * more: near capacity, what is admitted queues ahead of the critical requests still to come
 * (docs/architecture-choice.md, "Shedding").
 */
export function shouldShed(crit: i32, pressure: f64, poolPressure: f64, sheddableAt: f64, standardAt: f64): bool {
  // near capacity only the sheddable threshold tightens: standard is never shed below standardAt
  const s = poolPressure >= sheddableAt * 0.5 ? sheddableAt * 0.5 : sheddableAt;
  if (crit == CRIT_SHEDDABLE) return pressure >= s;
  if (crit == CRIT_STANDARD) return pressure >= standardAt;
  return false;
}
