// When a model pool is overloaded, for the pool thresholds of shedding (request.shedding.poolSheddableAt
// / poolStandardAt) and for shedding standard requests at all (docs/architecture-choice.md,
// "Shedding"). The state is ENTERED only on the servers' own evidence of sustained excess: at least
// a quarter of the pool's eligible instances (one at least) report a waiting count that rose at each
// of their last scrapes (snapshot flag queueGrowing, agent estimator QUEUE_GROWTH_SCRAPES). The
// filter's own refusals never enter it: refusals on a capacity guessed from a cold fleet's first
// batches once switched a whole pool into overload and kept refusing the retries (issue 20).
// Once entered, it HOLDS while the evidence is recent (EVIDENCE_HOLD_MS) or the share of the
// pool's non-critical requests shed lately is at `shedding.overloadShare` (0.3) or more — under
// the pool thresholds the servers stop queueing (that is their purpose), and the share shed is
// then what says the excess lasts (80-90 % while it does). It LEAVES by itself: once the excess
// ends the pool drains, the pool thresholds shed less than 30 % (10-20 % at normal load) and no
// server reports growth. A burst that lands at once raises the servers' queues once and drains:
// it never enters the state, so its requests queue at the servers instead of being refused.

/** How long a pool stays overloaded after the last evidence of growth, whatever the share shed: two scrapes at the agent's default 1 s. */
export const EVIDENCE_HOLD_MS: f64 = 2000;

/** Whether `growing` of `eligible` instances reporting a growing queue is evidence for their pool: a quarter of them, one at least. */
@inline export function growthEvidence(growing: i32, eligible: i32): bool {
  return growing > 0 && growing * 4 >= eligible;
}

class PoolState {
  share: f64 = 0;
  on: bool = false;
  evidenceAtMs: f64 = -Infinity;
}

/** Weight of each request in the average: about the last 50 non-critical requests of the pool. */
export const OVERLOAD_WEIGHT: f64 = 0.02;

/**
 * The share shed lately, per model pool (LlmPlan.poolOf: a base model with its adapters; "" where the
 * request names none). Kept per model name first, an adapter's pool sat in the off state (the
 * instance thresholds shed about 5 % of its requests) while its base model's was on (80 %): its
 * traffic took the capacity the pool thresholds freed (docs/architecture-choice.md).
 */
export class OverloadShares {
  private pools: Map<string, PoolState> = new Map();

  share(pool: string): f64 {
    return this.pools.has(pool) ? this.pools.get(pool).share : 0;
  }

  private at(pool: string): PoolState {
    if (this.pools.has(pool)) return this.pools.get(pool);
    const st = new PoolState();
    this.pools.set(pool, st);
    return st;
  }

  /**
   * The pool's state for a request at `nowMs`: `evidence` whether the servers show sustained
   * excess now (growthEvidence over the request's eligible candidates), `overloadShare` the
   * configured share. Enters only on evidence; holds while the evidence is recent or the share
   * shed is at `overloadShare`; leaves otherwise.
   */
  overloaded(pool: string, evidence: bool, nowMs: f64, overloadShare: f64): bool {
    if (!evidence && !this.pools.has(pool)) return false;
    const st = this.at(pool);
    if (evidence) { st.on = true; st.evidenceAtMs = nowMs; return true; }
    if (st.on && !(nowMs - st.evidenceAtMs <= EVIDENCE_HOLD_MS) && st.share < overloadShare) st.on = false;
    return st.on;
  }

  /**
   * A non-critical request of `pool` was shed or sent. `live` is the plan's model index: pools
   * the plan no longer names are dropped once there are more entries than it has (so the map
   * follows the fleet's models, not the model names clients send).
   */
  note(pool: string, shed: bool, live: Map<string, i32>): void {
    const st = this.at(pool);
    st.share += OVERLOAD_WEIGHT * ((shed ? 1.0 : 0.0) - st.share);
    if (this.pools.size > live.size + 1) {
      const keys = this.pools.keys();
      for (let k = 0; k < keys.length; k++) {
        const key = unchecked(keys[k]);
        if (key.length > 0 && !live.has(key)) this.pools.delete(key);
      }
    }
  }

  get size(): i32 { return this.pools.size; }
}
