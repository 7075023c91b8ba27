// Which snapshot is current, and whether it is still fresh (D3).
//
// Snapshots are ordered by seq within one agent boot (the header's bootId). A snapshot from
// another boot takes over at once, whatever its seq and generatedAtMs: the agent restarted,
// possibly with an earlier clock, and the old boot cannot speak any more. Time only decides
// freshness, and a snapshot dated more than maxSkewMs ahead of this proxy's clock is refused
// (never adopted, never kept as current): the agent runs beside the proxy and shares its clock,
// so such a date is a clock error, and adopting it would pin the workers to it.
import { SnapshotStamp } from "./snapshot";

/** Accepted clock skew between agent and proxy (same node: only scheduling and rounding). */
export const MAX_CLOCK_SKEW_MS: u64 = 2000;

export const ORDER_ADOPT: i32 = 0;  // newer seq of the same boot, a new boot, or nothing held yet
export const ORDER_SAME: i32 = 1;   // the version already held
export const ORDER_OLDER: i32 = 2;  // an older seq of the boot already held
export const ORDER_FUTURE: i32 = 3; // dated beyond now + maxSkewMs: refused

/** Dated beyond now + maxSkewMs. */
export function isFutureDated(nowMs: u64, generatedAtMs: u64, maxSkewMs: u64): bool {
  return generatedAtMs > nowMs && generatedAtMs - nowMs > maxSkewMs;
}

/**
 * A snapshot older than stalenessMs, or dated beyond the accepted skew, is stale: the fail mode
 * applies. One dated ahead within the skew counts as age 0.
 */
export function isStale(nowMs: u64, generatedAtMs: u64, stalenessMs: i32, maxSkewMs: u64): bool {
  if (isFutureDated(nowMs, generatedAtMs, maxSkewMs)) return true;
  if (generatedAtMs >= nowMs) return false;
  return nowMs - generatedAtMs > <u64>stalenessMs;
}

/** What to do with `cand` when `cur` is held (null: nothing yet). */
export function orderSnapshot(cur: SnapshotStamp | null, cand: SnapshotStamp, nowMs: u64, maxSkewMs: u64): i32 {
  if (isFutureDated(nowMs, cand.generatedAtMs, maxSkewMs)) return ORDER_FUTURE;
  if (cur == null) return ORDER_ADOPT;
  const held = cur;
  if (held.bootId != cand.bootId) return ORDER_ADOPT;
  if (cand.seq == held.seq) return ORDER_SAME;
  // a held snapshot that is now beyond the skew (this proxy's clock stepped back) must not keep
  // a newer one out; seq still orders the rest of the boot
  if (cand.seq > held.seq || isFutureDated(nowMs, held.generatedAtMs, maxSkewMs)) return ORDER_ADOPT;
  return ORDER_OLDER;
}
