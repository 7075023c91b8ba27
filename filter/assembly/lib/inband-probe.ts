// Probe pacing (no absorbing state; docs/inband.md "No absorbing state"): pure, with the table's
// per-slot backoff (InbandTable.sent) and the pick (choice/scorer-inband.ts probePick).

/** Probe spacing doubles at most this often (idleMs · 4: a recovered instance is probed within 4 s by default). */
export const MAX_PROBE_BACKOFF: i32 = 2;

/**
 * Probe share (no absorbing state): every `every`-th request of a service may go to an eligible
 * instance that has had no request from this VM for `idleMs`, whatever its price, so that fresh
 * answers can correct an estimate nothing else would correct. Round-robin over the candidates.
 */
export class Prober {
  countdown: i32 = 0;
  cursor: i32 = 0;
  constructor(public every: i32, public idleMs: f64) { this.countdown = every; }

  /** The countdown to the next probe from a uniform draw u in [0, 1): 1 .. 2·every − 1 calls, mean `every`. */
  rephase(u: f64): void {
    if (this.every <= 0) return;
    const k = 1 + <i32>Math.floor(u * <f64>(2 * this.every - 1));
    this.countdown = k < 2 * this.every - 1 ? k : 2 * this.every - 1;
  }

  /**
   * The countdown when a probe was due but its instance still waits: 1 .. every/PROBE_RETRY_DIV
   * calls from the draw u (drawn, so worker VMs do not probe it at the same moment).
   */
  retry(u: f64): void {
    if (this.every <= 0) return;
    const span = this.every / PROBE_RETRY_DIV > 1 ? this.every / PROBE_RETRY_DIV : 1;
    const k = 1 + <i32>Math.floor(u * <f64>span);
    this.countdown = k < span ? k : span;
  }

  /** True once every `every` calls (never when every <= 0). */
  @inline due(): bool {
    if (this.every <= 0) return false;
    if (--this.countdown > 0) return false;
    this.countdown = this.every;
    return true;
  }
}

/** A probe that found its instance still waiting is retried within every / PROBE_RETRY_DIV calls. */
export const PROBE_RETRY_DIV: i32 = 8;

/** Requests between probes for a probe share (0: never; share 0.01 → every 100th request). */
export function probeEvery(share: f64): i32 {
  if (!(share > 0)) return 0;
  const e = Math.round(1 / share);
  return e < 1 ? 1 : <i32>e;
}
