// Reference policies that are NOT deployable (they read the simulator's exact state): bounds
// for what any router could achieve on this fleet without knowing request sizes.
import type { EngineCtx, RoutingPolicy } from './des';

/**
 * Shortest expected delay with perfect information: argmin E[S_j]·(1 + n_j/c) over instances,
 * n_j = requests at j now (exact), E[S_j] = the true mean service time at j's speed. The
 * "knows everything but the request's size" greedy bound.
 */
export class SedOracle implements RoutingPolicy {
  readonly name = 'oracle-sed';
  private ctx!: EngineCtx;
  init(ctx: EngineCtx): void {
    this.ctx = ctx;
  }
  route(): number {
    const f = this.ctx.fleet;
    let best = -1;
    let bestCost = Infinity;
    for (let j = 0; j < f.speeds.length; j++) {
      const es = f.meanMs / f.speeds[j];
      const cost = es + (this.ctx.inSystem[j] * es) / f.slots;
      if (cost < bestCost) {
        bestCost = cost;
        best = j;
      }
    }
    return best;
  }
}
