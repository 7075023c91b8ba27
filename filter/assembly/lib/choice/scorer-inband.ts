// Scorer, per request: the in-band correction (lib/inband.ts, docs/inband.md). The table keeps,
// per in-flight slot, a factor that multiplies the scraped cost (slowdown, level, errors) and an
// ORCA queue that replaces the scraped one while it is newer than the scrape; both are written on
// the response path and on the tick, so the request reads two f64 per candidate scored.
// adjP = 0: in-band off (factor 1, the scraped queue).
import { Plan } from "./plan";
import { ptr, f64At, i32At } from "./flat";
import { ADJ_STRIDE, InbandTable, Prober } from "../inband";
import { Rng } from "../inflight";
import { SKIP_NONE, SKIP_SLOW } from "./skip";

@inline export function inbandFactor(adjP: usize, slot: i32): f64 {
  return adjP == 0 ? 1.0 : load<f64>(adjP + (<usize>(slot * ADJ_STRIDE) << 3));
}

/** The own price of our outstanding requests, added to the factored cost (ms; InbandTable.ownPriceAt); 0 with in-band off. */
@inline export function inbandOwn(adjP: usize, slot: i32): f64 {
  return adjP == 0 ? 0.0 : load<f64>(adjP + (<usize>(slot * ADJ_STRIDE + 3) << 3));
}

/**
 * The queue term of the backlog: the in-band override (ORCA queue, or the queue read from the
 * wait) when present, else the scraped qAdj; at most the cap (a request that found a free slot).
 */
@inline export function inbandQueue(adjP: usize, slot: i32, qAdj: f64): f64 {
  if (adjP == 0) return qAdj;
  const p = adjP + (<usize>(slot * ADJ_STRIDE + 1) << 3);
  const q = load<f64>(p);
  const v = q == q ? q : qAdj;
  const cap = load<f64>(p, 8);
  return v < cap ? v : cap;
}

/**
 * The probe (no absorbing state): a candidate that is eligible or priced out by the health
 * scorer (skip reason slow: weight 0 is a price, and a P99 window that remembers an episode is
 * exactly what fresh answers must correct), not stale, with a free slot by our estimate, that
 * this VM has sent nothing to for prober.idleMs (and past its probe backoff); -1 if none.
 * Round-robin from the prober's cursor, so repeated probes visit every idle instance;
 * O(candidates), once per prober.every requests on average.
 */
/** Base price (E[S] part, times the in-band factor) over the cheapest from which an instance counts as priced out. */
export const PRICED_OUT: f64 = 2;

export function probePick(plan: Plan, table: InbandTable, prober: Prober, inflightP: usize, nowMs: f64, rng: Rng): i32 {
  // the next probe comes after 1 .. 2·every − 1 requests (mean: every): worker VMs that take
  // requests in turn would otherwise all probe the same idle instance at the same moment, before
  // the tick shares their last sends
  const u = rng.next();
  prober.rephase(u);
  const m = plan.n;
  if (m < 2) return -1;
  const since = nowMs - prober.idleMs;
  const slotP = ptr(plan.slot), staleP = ptr(plan.staleAtMs), qP = ptr(plan.qAdj), slotsP = ptr(plan.slots), skipP = ptr(plan.skip);
  const bwP = ptr(plan.bw);
  const adjP = table.adj.dataStart;
  const n = table.size();
  // the cheapest load-independent price: only instances priced well above it are probed
  let minBase = Infinity;
  for (let i = 0; i < m; i++) {
    if (i32At(skipP, i) != SKIP_NONE) continue;
    const slot = i32At(slotP, i);
    const c = f64At(bwP, i) * (slot < n ? inbandFactor(adjP, slot) : 1.0);
    if (c < minBase) minBase = c;
  }
  let waiting = false;
  for (let k = 0; k < m; k++) {
    const e = (prober.cursor + k) % m;
    const i = e;
    const skip = i32At(skipP, i);
    if (skip != SKIP_NONE && skip != SKIP_SLOW) continue;
    const slot = i32At(slotP, i);
    if (slot >= table.size() || nowMs >= f64At(staleP, i)) continue;
    // priced out: skipped as slow, or its base price PRICED_OUT times the cheapest. An instance
    // merely loaded (several proxies at rho 0.95: each sees it idle from its own traffic) is
    // priced by its queue and needs no probe -- probing it cost 4 proxies 10-20 % of their P99
    if (skip == SKIP_NONE && f64At(bwP, i) * inbandFactor(adjP, slot) < PRICED_OUT * minBase) continue;
    const b = f64At(qP, i) + <f64>i32At(inflightP, slot);
    if (b >= f64At(slotsP, i)) continue;
    // an instance recovering from a verdict (a normal answer since) is probed again as soon as
    // nothing of ours is outstanding there, not after idleMs: recovery needs RECOVERY_ANSWERS
    // normal answers, and waiting idleMs for each kept the recovered instance of the Linkerd
    // case out for ~2 s more (a slow one answers in turn: one probe at a time)
    const recovering = table.recovering(slot, nowMs);
    const idle = unchecked(table.lastSentMs[slot]) <= since || (recovering && i32At(inflightP, slot) == 0);
    if (!idle || nowMs < unchecked(table.probeUntil[slot])) {
      if (recovering) waiting = true;
      continue;
    }
    prober.cursor = (e + 1) % m;
    return i;
  }
  // a priced-out instance recovering from a verdict (InbandTable.recovering: it may be back) that
  // waits its idleMs: the next probe comes soon after, not a whole countdown later (recovery
  // needs RECOVERY_ANSWERS of them, and waited ~1-2 s per probe for the countdown). Not for an
  // instance merely dear (a slow GPU generation): probed every second, it lost fleet B ~0.03 of P99
  if (waiting) prober.retry(u);
  return -1;
}
