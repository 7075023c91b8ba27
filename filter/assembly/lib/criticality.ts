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
 * The shedding thresholds: backlog per slot (sheddableAt / standardAt), or, where the agent
 * publishes the instance's KV capacity, backlog as a share of it (kvSheddableAt / kvStandardAt);
 * and the pool's: the eligible instances' backlog as a share of their summed KV capacity
 * (poolSheddableAt / poolStandardAt; 1000: in effect never), applied while the pool is
 * overloaded (lib/overload.ts).
 */
export class ShedAt {
  sheddable: f64 = 1;
  standard: f64 = 2;
  kvSheddable: f64 = 0.6;
  kvStandard: f64 = 0.7;
  poolSheddable: f64 = 0.15;
  poolStandard: f64 = 0.2;
  /** the share of a pool's non-critical requests shed lately from which the pool thresholds apply (lib/overload.ts) */
  overloadShare: f64 = 0.3;
  set(sheddable: f64, standard: f64, kvSheddable: f64, kvStandard: f64, poolSheddable: f64, poolStandard: f64, overloadShare: f64): void {
    this.sheddable = sheddable; this.standard = standard; this.kvSheddable = kvSheddable; this.kvStandard = kvStandard;
    this.poolSheddable = poolSheddable; this.poolStandard = poolStandard; this.overloadShare = overloadShare;
  }
}

/** A pressure as a multiple of a threshold: 1 at the threshold; a threshold of 0 is reached at once. */
@inline export function loadAt(pressure: f64, threshold: f64): f64 {
  return threshold > 0 ? pressure / threshold : Infinity;
}

/** The pool's pressure as a multiple of a pool threshold: 0 when the pool has no known KV capacity (NaN), which loadAt would take for reached at a threshold of 0. */
@inline export function poolLoadAt(poolPressure: f64, threshold: f64): f64 {
  return poolPressure == poolPressure ? loadAt(poolPressure, threshold) : 0;
}

/**
 * Whether a request of criticality `crit` is shed where it would go: `overloaded` whether its pool
 * is overloaded by the servers' own evidence (lib/overload.ts), `shedLoad` and `stdLoad` that
 * instance's pressure as a multiple of its sheddable and standard thresholds (loadAt; 0 where its
 * capacity is unknown), `poolShedLoad` the least such sheddable load among the eligible instances
 * (+Inf when none is), `poolSheddable` / `poolStandard` the pool's pressure as a multiple of the
 * pool thresholds (poolLoadAt), 0 while the pool is not overloaded.
 * Sheddable at 1; the sheddable threshold halves while the pool's least loaded instance is at half
 * of its own or more: near capacity, what is admitted queues ahead of the critical requests still
 * to come. Standard only while the pool is overloaded (at 1, or at a pool threshold): a pool the
 * servers do not show saturated (ρ < 1: no sustained queue growth) never refuses a standard
 * request — a burst queues at the servers. At a pool threshold the class is shed wherever it would
 * go: the pool is held near its normal load under overload, not at each instance's threshold
 * (docs/architecture-choice.md, "Shedding").
 */
export function shouldShed(crit: i32, overloaded: bool, shedLoad: f64, stdLoad: f64, poolShedLoad: f64, poolSheddable: f64 = 0, poolStandard: f64 = 0): bool {
  // near capacity only the sheddable threshold tightens: standard is never shed below its own
  if (crit == CRIT_SHEDDABLE) return shedLoad >= (poolShedLoad >= 0.5 ? 0.5 : 1) || poolSheddable >= 1;
  if (crit == CRIT_STANDARD) return overloaded && (stdLoad >= 1 || poolStandard >= 1);
  return false;
}
