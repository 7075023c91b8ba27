// Request-aware instance choice (pure): the scoring pass of choice/score-request.ts, the saturation
// filter, the picker — the configured one, except for critical requests, which get the cheapest
// instance with room (choice/picker-calm.ts) — then the shedding rule (lib/criticality.ts) on the
// chosen instance's pressure; a request sent charges its prefill to the instance
// (RequestCost.charge, lib/pending-prefill.ts).
import { Rng } from "./inflight";
import { Pick, Plan } from "./choice/plan";
import { LlmPlan } from "./choice/plan-llm";
import { scoreRequest, RequestCost, CostParams } from "./choice/score-request";
import { dropSaturated } from "./choice/filter-saturated";
import { p2cScored } from "./choice/picker-p2c";
import { bandPick } from "./choice/picker-band";
import { calmPick } from "./choice/picker-calm";
import { applySubset } from "./choice/subset";
import { CRIT_CRITICAL, shouldShed, poolLoadAt } from "./criticality";
import { modelCostMs } from "./choice/filter-model";
import { PICKER_P2C } from "./choose";
import { PendingPrefill } from "./pending-prefill";

export class RequestPick {
  pick: Pick = new Pick();
  /** The request is to be shed (429): the pool is under pressure for its criticality. */
  shed: bool = false;
  /** The request's model pool was overloaded: the pool thresholds applied (lib/overload.ts). */
  overloaded: bool = false;
}

export function pickForRequest(plan: Plan, lp: LlmPlan, inflight: Array<i32>, pending: PendingPrefill, nowMs: f64, picker: i32, band: f64, rng: Rng,
  rc: RequestCost, cp: CostParams, crit: i32, out: RequestPick, subset: StaticArray<u8> | null = null): RequestPick {
  const p = plan.result.reset();
  // the probe (scorer-inband.ts) picks among all candidates, blind to the model filter, and the
  // request cost does not read the in-band factor it re-learns: no probing here
  p.probe = false;
  out.pick = p;
  out.shed = false;
  out.overloaded = false;
  const inflightP = inflight.dataStart;
  const scan = scoreRequest(plan, lp, inflightP, pending, nowMs, rc, cp);
  dropSaturated(plan, inflightP, scan);
  if (subset != null) applySubset(plan, scan, subset!);
  p.scored = true;
  p.eligible = scan.eligible;
  if (scan.eligible == 0) return out;
  if (crit == CRIT_CRITICAL) {
    calmPick(plan, rc.stdLoadOf, rc.drainOf, rc.pressureOf, rc.affinity, p, rc.speedOf);
    if (p.index < 0) bandPick(plan, scan.best, 0, rng, p);
  }
  else {
    if (picker == PICKER_P2C) {
      p2cScored(plan, scan.eligible, rng, p);
      // p2c plus the prefix holder: the draw keeps proxies from herding, the third contender keeps
      // a request with a cached prefix from missing the instance that holds it
      const a = rc.affinity;
      if (a >= 0 && unchecked(plan.cost[a]) < unchecked(plan.cost[p.index])) { p.index = a; p.considered = 3; }
    }
    // the band never draws away a prefill saving larger than its own error (picker-band.ts)
    else bandPick(plan, scan.best, band, rng, p, rc.prefillMs, rc.decodeOf);
    // judged where the request would go: admitting on the account of the pool's least loaded
    // instance, which the picker may not have drawn, loads the busy ones; judged on the chosen
    // one, the share shed follows the share of busy instances (docs/architecture-choice.md)
    // the pool thresholds only while the pool is overloaded (lib/overload.ts)
    if (p.index >= 0) {
      // the pool is the base model's instances: an adapter's requests count with its base model's
      const pool = lp.hasData && rc.modelCol >= 0 && rc.modelCol < lp.poolOf.length ? unchecked(lp.poolOf[rc.modelCol]) : "";
      // entered on the servers' evidence only (a growing queue), never on this filter's refusals
      const ov = rc.overload.overloaded(pool, rc.evidence, nowMs, cp.shed.overloadShare);
      out.overloaded = ov;
      // standard requests: shed at their instance thresholds within the episode, at the pool's while on
      const episode = ov || rc.overload.inEpisode(pool, nowMs);
      out.shed = shouldShed(crit, episode, unchecked(rc.shedLoadOf[p.index]), unchecked(rc.stdLoadOf[p.index]), rc.poolShedLoad,
        ov ? poolLoadAt(rc.poolPressure, cp.shed.poolSheddable) : 0, ov ? poolLoadAt(rc.poolPressure, cp.shed.poolStandard) : 0);
      rc.overload.note(pool, out.shed, lp.modelIndex);
      if (out.shed) return out;
    }
  }
  if (p.index >= 0) {
    // an adapter load delays the instance's steps; waiting for a LoRA slot to drain does not, nor
    // joining an adapter that streams there
    const extra = unchecked(rc.runOf[p.index]) != 0 ? 0 : modelCostMs(lp, lp.hasData ? rc.modelCol : -1, p.index, cp.adapterLoadMs);
    rc.charge(pending, p.index, unchecked(plan.slot[p.index]), nowMs, extra < cp.adapterLoadMs ? extra : cp.adapterLoadMs);
  }
  return out;
}
