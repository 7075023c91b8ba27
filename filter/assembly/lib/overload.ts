// When a model pool is overloaded, for the pool thresholds of shedding (request.shedding.poolSheddableAt
// / poolStandardAt; docs/architecture-choice.md, "Shedding"). A pool is overloaded while the share
// of its non-critical requests shed lately is at `shedding.overloadShare` (0.3) or more. The
// instance thresholds shed next to nothing at normal load, so this needs no level of its own: at
// normal load the pool thresholds stay off however the pool's pressure bursts; once the instance
// thresholds shed 30 % of the traffic, the pool thresholds hold the pool's backlog near its normal
// level and keep the share up (80-90 %) for as long as the excess lasts. When it ends, the pool
// drains under them and they shed less than 30 % (10-20 % at normal load): the pool is released.
// At 0.2 it was not (docs/architecture-choice.md, "Under overload, the pool thresholds").

/** Weight of each request in the average: about the last 50 non-critical requests of the pool. */
export const OVERLOAD_WEIGHT: f64 = 0.02;

/**
 * The share shed lately, per model pool (LlmPlan.poolOf: a base model with its adapters; "" where the
 * request names none). Kept per model name first, an adapter's pool sat in the off state (the
 * instance thresholds shed about 5 % of its requests) while its base model's was on (80 %): its
 * traffic took the capacity the pool thresholds freed (docs/architecture-choice.md).
 */
export class OverloadShares {
  private shares: Map<string, f64> = new Map();

  share(pool: string): f64 {
    return this.shares.has(pool) ? this.shares.get(pool) : 0;
  }

  /**
   * A non-critical request of `pool` was shed or sent. `live` is the plan's model index: pools
   * the plan no longer names are dropped once there are more entries than it has (so the map
   * follows the fleet's models, not the model names clients send).
   */
  note(pool: string, shed: bool, live: Map<string, i32>): void {
    const s = this.share(pool);
    this.shares.set(pool, s + OVERLOAD_WEIGHT * ((shed ? 1.0 : 0.0) - s));
    if (this.shares.size > live.size + 1) {
      const keys = this.shares.keys();
      for (let k = 0; k < keys.length; k++) {
        const key = unchecked(keys[k]);
        if (key.length > 0 && !live.has(key)) this.shares.delete(key);
      }
    }
  }

  get size(): i32 { return this.shares.size; }
}
