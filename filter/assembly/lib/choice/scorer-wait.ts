// Scorer: expected time in system of the next request sent to an instance (ms),
//   W = E[S] + [M/G/1 queueing delay, model mg1] + RTT(peer)     static: per snapshot
//     + backlog · E[S]/c                                         per request
// backlog = max(0, q − n_scrape + n_now): the queue the agent scraped plus what this proxy added
// since (our in-flight count across worker VMs). With in-band learning the sum is multiplied by the
// slot's in-band factor and this VM's outstanding requests add what the backlog term misses of
// them (the own price: ownPrice, InbandTable.ownPriceAt). docs/architecture-choice.md explains the terms.
import { Plan } from "./plan";
import { ptr, f64At, i32At } from "./flat";
import { inbandFactor, inbandQueue, inbandOwn } from "./scorer-inband";

export const MODEL_CONDITIONAL: i32 = 0;
export const MODEL_MG1: i32 = 1;

/**
 * Pollaczek–Khinchine mean queueing delay (ms): ρ·E[S²]/(2·E[S]·(1 − ρ)). ρ is capped at 0.99 so
 * that the term stays finite (saturation is a filter, not a price); E[S²] >= E[S]² always, and an
 * unknown (non-finite) E[S²] is taken as E[S]².
 */
export function mg1QueueingMs(rho: f64, esMs: f64, es2Ms2: f64): f64 {
  const es = esMs > 0 ? esMs : 0;
  if (es == 0) return 0;
  const r = rho > 0 ? (rho < 0.99 ? rho : 0.99) : 0;
  const es2 = es2Ms2 > es * es && es2Ms2 < Infinity ? es2Ms2 : es * es;
  return r * es2 / (2 * es * (1 - r));
}

/** M/G/1 mean time in system (ms): the queueing delay plus E[S]. */
export function mg1WaitMs(rho: f64, esMs: f64, es2Ms2: f64): f64 {
  const es = esMs > 0 ? esMs : 0;
  if (es == 0) return 0;
  return mg1QueueingMs(rho, es, es2Ms2) + es;
}

/** Static part of W: E[S] (+ queueing delay, model mg1) (+ the link's round trip, remote instances). */
export function baseWaitMs(model: i32, rho: f64, esMs: f64, es2Ms2: f64, linkRttMs: f64): f64 {
  const w = model == MODEL_MG1 ? mg1WaitMs(rho, esMs, es2Ms2) : esMs;
  return w + (linkRttMs > 0 && linkRttMs < Infinity ? linkRttMs : 0);
}

/**
 * Requests ahead of the next one at candidate i: the scraped queue (or a newer ORCA queue, adjP:
 * scorer-inband.ts) plus what we added since.
 */
@inline export function backlogAt(plan: Plan, inflightP: usize, i: i32, adjP: usize = 0): f64 {
  return backlogOf(adjP, i32At(ptr(plan.slot), i), f64At(ptr(plan.qAdj), i), inflightP);
}

/** The backlog of slot `slot` given its queue term qAdj (the regular one, or the overflow's). */
@inline export function backlogOf(adjP: usize, slot: i32, qAdj: f64, inflightP: usize): f64 {
  const b = inbandQueue(adjP, slot, qAdj) + <f64>i32At(inflightP, slot);
  return b > 0 ? b : 0;
}

/**
 * De-weighted W of candidate i given its backlog: bw + backlog·pw (both divided by the weight),
 * times the in-band factor (adjP: scorer-inband.ts; 0 = none).
 */
@inline export function costAt(plan: Plan, i: i32, backlog: f64, adjP: usize = 0): f64 {
  return priceOf(f64At(ptr(plan.bw), i), f64At(ptr(plan.pw), i), backlog, adjP, i32At(ptr(plan.slot), i));
}

/** base + backlog x per-request term, times the slot's in-band factor, plus its own price: W for any base/per pair. */
@inline export function priceOf(baseMs: f64, perMs: f64, backlog: f64, adjP: usize, slot: i32): f64 {
  return (baseMs + backlog * perMs) * inbandFactor(adjP, slot) + inbandOwn(adjP, slot);
}
