// Reference policies that are NOT deployable (they read the simulator's exact state): bounds
// for what any router could achieve on this fleet without knowing request sizes.
import type { EngineCtx, Episode, RoutingPolicy } from './des';

/**
 * Shortest expected delay with perfect information: argmin E[S_j]·(1 + n_j/c) over instances,
 * n_j = requests at j now (exact), E[S_j] = the true mean service time at j's speed. The
 * "knows everything but the request's size" greedy bound.
 */
export class SedOracle implements RoutingPolicy {
  readonly name = 'oracle-sed';
  private ctx!: EngineCtx;
  /** episodes (des.ts) the oracle knows of: a slow instance's true E[S], a failing one avoided */
  constructor(private readonly episodes: Episode[] = []) {}
  init(ctx: EngineCtx): void {
    this.ctx = ctx;
  }
  route(t = this.ctx.now()): number {
    const f = this.ctx.fleet;
    let best = -1;
    let bestCost = Infinity;
    for (let j = 0; j < f.speeds.length; j++) {
      let es = f.meanMs / f.speeds[j];
      for (const e of this.episodes) {
        if (e.inst !== j || t < e.fromMs || t >= e.toMs) continue;
        if (e.kind === 'slow') es *= e.factor ?? 1;
        else es = Infinity;
      }
      if (es === Infinity) continue;
      const cost = es + (this.ctx.inSystem[j] * es) / f.slots;
      if (cost < bestCost) {
        bestCost = cost;
        best = j;
      }
    }
    if (best < 0) throw new Error('oracle-sed: every instance is failing');
    return best;
  }
}
