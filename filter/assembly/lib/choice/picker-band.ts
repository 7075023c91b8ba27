// Picker: uniformly among the candidates whose cost is within (1 + band) of the cheapest
// (band 0: always the cheapest; deterministic, which the tests use).
//
// The band guards against herding: proxies deciding on the same, up to a scrape old, load data
// would all pick one "best". Its width is the error of what it spreads, and each part of a price
// has its own (docs/architecture-choice.md, "The band and a real saving"):
// - the load part (backlog, slots, E[S]) is known to within a fraction of the whole price: the
//   band (10 % by default) of the cheapest's cost — of its time to first token where the price
//   also holds the request's decode (`decodeMs`, per candidate): a decode of 256 tokens on the
//   pool's line is the same few seconds everywhere, and 10 % of it (~0.7 s) spans several prefills
//   queued ahead, which is the TTFT tail the band would draw into;
// - the request's own prefill — its uncached prompt tokens on each candidate, which the proxy
//   knows from where it sent the same prefix — is known to within the per-token rate's error, a
//   fraction of that prefill, not of the whole price. So a candidate whose prefill exceeds the
//   least prefill in the cost band by more than band × that prefill is never drawn: a 213 ms
//   prefix saving in a 3 s price stays a saving (without this, every worker was "within 10 %" and
//   453 of 960 burst requests went to a worker without the prefix) — also where the holder's
//   queue makes it a little dearer than the cheapest, within the load's error: in a cold burst
//   the queues are seconds long, and the band's tenth of them drew late groups' requests at random
//   over the workers, each a 205 ms prefill computed again.
// Where no candidate in the band has a prefill (0: no per-token terms) only the cost band applies.
import { Rng } from "../inflight";
import { Pick, Plan } from "./plan";
import { ptr, f64At } from "./flat";

/** Picks from a scored plan (plan.cost: +Inf = out) whose cheapest cost is `best`; `prefillMs`
 *  (optional, per candidate: the request's own uncached prefill there) bounds the draw as above,
 *  `decodeMs` (optional, per candidate: the decode part of its cost) narrows the band to the rest. */
export function bandPick(plan: Plan, best: f64, band: f64, rng: Rng, p: Pick, prefillMs: StaticArray<f64> | null = null,
  decodeMs: StaticArray<f64> | null = null): void {
  const n = plan.n;
  const costP = ptr(plan.cost);
  let limit = best * (1 + band);
  if (decodeMs != null && decodeMs.length >= n) {
    for (let i = 0; i < n; i++) {
      if (f64At(costP, i) == best) {
        const d = unchecked(decodeMs[i]);
        if (d > 0 && d < best) limit = best + band * (best - d);
        break;
      }
    }
  }
  let prefillLimit = Infinity;
  if (prefillMs != null && band > 0 && prefillMs.length >= n) {
    // the least prefill among the candidates in the cost band (the cheapest's, or less: a holder
    // of the prefix whose queue makes it a little dearer is within the load's error, its saving is not)
    let least = Infinity;
    for (let i = 0; i < n; i++) {
      if (!(f64At(costP, i) <= limit)) continue;
      const own = unchecked(prefillMs[i]);
      if (own < least) least = own;
    }
    if (least < Infinity) prefillLimit = least * (1 + band);
  }
  let inBand = 0;
  for (let i = 0; i < n; i++) if (inBandAt(costP, prefillMs, i, limit, prefillLimit)) inBand++;
  p.considered = inBand;
  let k = <i32>(rng.next() * <f64>inBand);
  if (k >= inBand) k = inBand - 1;
  for (let i = 0; i < n; i++) {
    if (inBandAt(costP, prefillMs, i, limit, prefillLimit)) {
      if (k == 0) { p.index = i; return; }
      k--;
    }
  }
}

@inline function inBandAt(costP: usize, prefillMs: StaticArray<f64> | null, i: i32, limit: f64, prefillLimit: f64): bool {
  if (!(f64At(costP, i) <= limit)) return false;
  return prefillLimit == Infinity || unchecked((prefillMs as StaticArray<f64>)[i]) <= prefillLimit;
}
