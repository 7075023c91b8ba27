// What the load around an instance says (docs/inband.md): the other proxies' queue read from the
// time to headers of our requests (readWait), the queue an ORCA report on an answer gives
// (readOrca), and the service-wide shares the pile and the error price compare an instance with
// (fairShares). Functions over InbandTable's per-slot state.
import { InbandTable, InbandParams } from "./inband";
import { ADJ_STRIDE, WAIT_BUSY, WAIT_MAX_SLOTS, WAIT_STEP, RECOVERY_MEMORY_MS } from "./inband-rules";
import { OrcaReport } from "./orca";
import { getF, setF } from "./slot-array";

/**
 * The other proxies' load from the time to headers `x` of a request started at `start`: the
 * wait (x − floor) is the queue ahead of it in units of E[S]/c, so the instance then held about
 * c − 1 + wait · c / E[S] requests besides this one, `sentWith` of them ours (our in-flight
 * count when it was sent); without a wait it had a free slot: at most c − 1. The first replaces
 * the scraped queue (as an ORCA queue does) and the second caps it, until a scrape taken after
 * `start`; an ORCA report newer than the scrape takes precedence (it counts the whole queue, at
 * its answer).
 */
export function readWait(t: InbandTable, s: i32, start: f64, x: f64, sentWith: i32): void {
  const f = getF(t.hdrFloor.dataStart, s);
  setF(t.hdrFloor.dataStart, s, f == f ? (x < f ? f + 0.5 * (x - f) : f + 0.01 * (x - f)) : x);
  // the unit of the wait is the instance's usual E[S] / c (calib × norm, when known): a slowed
  // instance's scrape is stale, and its own inflated service time would hide its wait
  const cal = getF(t.calib.dataStart, s) * getF(t.eosRef.dataStart, s);
  const es = cal > 0 && cal < getF(t.esScrape.dataStart, s) ? cal : getF(t.esScrape.dataStart, s);
  const c = getF(t.slots.dataStart, s);
  if (!(es > 0) || f != f) return;
  if (getF(t.orcaAt.dataStart, s) > getF(t.scrapeAt.dataStart, s) || start <= getF(t.qAt.dataStart, s) || start <= getF(t.scrapeAt.dataStart, s)) return;
  // a slowed instance is priced by the slowdown (fuseFactor); its long waits are its own
  // service, not other proxies' load, and its free slots no news
  if (getF(t.slowAt.dataStart, s) > 0 && start - getF(t.slowAt.dataStart, s) <= RECOVERY_MEMORY_MS && getF(t.normalRun.dataStart, s) == 0) return;
  const unit = es / c;
  // a queue is told apart from the request's own time to headers only when a busy instance's
  // departure interval exceeds the unqueued time to headers (the floor): with c large or answers
  // in one piece every wait read as "all c slots busy" (a phantom queue of c − 1 on every
  // instance that answers, none on one that is silent: issue 21)
  if (unit <= f) return;
  const w = x - f;
  const base = getF(t.adj.dataStart, s * ADJ_STRIDE + 1);
  const fresh = base == base && getF(t.qAt.dataStart, s) > getF(t.scrapeAt.dataStart, s);
  if (w > WAIT_BUSY * unit) {
    let ahead = w / unit;
    if (ahead > WAIT_MAX_SLOTS * c) ahead = WAIT_MAX_SLOTS * c;
    // the others' share then (never below none: the wait is a noisy reading of the queue)
    const q = Math.max(0, c - 1 + ahead - <f64>sentWith);
    setF(t.adj.dataStart, s * ADJ_STRIDE + 1, fresh ? base + WAIT_STEP * (q - base) : q);
    setF(t.adj.dataStart, s * ADJ_STRIDE + 2, Infinity);
  } else {
    // a free slot at its start: what the scrape says, at most c − 1 in the instance
    setF(t.adj.dataStart, s * ADJ_STRIDE + 1, NaN);
    setF(t.adj.dataStart, s * ADJ_STRIDE + 2, Math.max(0, c - 1 - <f64>sentWith));
  }
  setF(t.qAt.dataStart, s, start);
}

/**
 * An ORCA report on an answer from slot s at `now` (InbandTable.orca); `inflightNow` is our in-flight
 * count then. Its queue (+ running = utilisation × slots) replaces the scraped queue until a newer scrape.
 */
export function readOrca(t: InbandTable, s: i32, r: OrcaReport, now: f64, inflightNow: i32): void {
  t.checkSlot(s);
  if (!r.ok) { t.orcaInvalid++; return; }
  t.orcaValid++;
  setF(t.orcaAt.dataStart, s, now);
  const u = r.utilization();
  setF(t.orcaUtil.dataStart, s, u);
  setF(t.orcaKv.dataStart, s, r.kvCache);
  setF(t.orcaErr.dataStart, s, r.eps > 0 && r.rps > 0 ? Math.min(1, r.eps / r.rps) : 0);
  if (!isNaN(r.queue)) {
    const running = u >= 0 && u < Infinity ? Math.min(u, 1) * getF(t.slots.dataStart, s) : 0;
    setF(t.adj.dataStart, s * ADJ_STRIDE + 1, r.queue + running - <f64>inflightNow);
    setF(t.adj.dataStart, s * ADJ_STRIDE + 2, Infinity);
    setF(t.qAt.dataStart, s, now);
  }
  t.fuse(s, now);
}

// per-service sums of the tick (reused: the tick allocates nothing once the fleet is seen)
const GRP_P: Array<InbandParams> = [];
const GRP_W: Array<f64> = [];
const GRP_S: Array<f64> = [];
const GRP_E: Array<f64> = [];

/**
 * fairN and esTyp per slot: per service (its params object), Σ λ²·L / Σ λ and Σ λ·E[S] / Σ λ
 * over its live slots -- the λ·L and the scraped E[S] of the instance a request of ours usually goes to (an instance we do not send to weighs
 * nothing: a priced-out one must not make its peers look piled up). O(live × services).
 */
export function fairShares(t: InbandTable, live: Array<i32> | null): void {
  const gp = GRP_P, gw = GRP_W, gs = GRP_S, ge = GRP_E;
  gp.length = 0; gw.length = 0; gs.length = 0; ge.length = 0;
  const nk = live != null ? live.length : t.gen.length;
  for (let k = 0; k < nk; k++) {
    const s = live != null ? unchecked(live[k]) : k;
    if (s >= t.gen.length) continue;
    const L = t.allRef[s] > 0 ? t.allRef[s] : t.esScrape[s];
    const r = t.rate[s];
    let g = gp.indexOf(t.paramsOf[s]);
    if (g < 0) { g = gp.length; gp.push(t.paramsOf[s]); gw.push(0); gs.push(0); ge.push(0); }
    if (L > 0 && r > 0) { gw[g] += r; gs[g] += r * r * L; ge[g] += r * t.esScrape[s]; }
  }
  for (let k = 0; k < nk; k++) {
    const s = live != null ? unchecked(live[k]) : k;
    if (s >= t.gen.length) continue;
    const g = gp.indexOf(t.paramsOf[s]);
    t.fairN[s] = gw[g] > 0 ? gs[g] / gw[g] : Infinity;
    t.esTyp[s] = gw[g] > 0 ? ge[g] / gw[g] : 0;
  }
}

