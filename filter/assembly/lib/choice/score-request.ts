// The request-aware scoring pass (request-aware services, once the body is read): the stale and
// static filters as in score.ts, the model filter, and a cost whose service time is the request's
// own (scorer-size.ts) less what its cached prefix saves (scorer-prefix.ts):
//   cost_i = rest_i + (S_i(request) + modelCost_i) / weight_i + backlog_i · E[S]_i/c_i / weight_i
// It also measures the pool's pressure for shedding: the least loaded eligible instance's backlog
// per slot (an instance with a full KV cache counts at least 1).
import { Plan, Scan } from "./plan";
import { LlmPlan } from "./plan-llm";
import { SKIP_NONE, SKIP_STALE } from "./skip";
import { anyStale } from "./filter-stale";
import { modelCostMs } from "./filter-model";
import { serviceMs } from "./scorer-size";
import { cachedTokens } from "./scorer-prefix";
import { ptr, f64At, setF64At, i32At } from "./flat";

/** The request's side of the cost, filled per request (reused: nothing allocated per request). */
export class RequestCost {
  /** Model column in the LlmPlan, -1: no restriction. */
  modelCol: i32 = -1;
  promptTokens: f64 = 0;
  outTokens: f64 = 0;
  /** Per candidate: leading prompt blocks it was sent (PrefixIndex). */
  cachedBlocks: StaticArray<i32> = new StaticArray<i32>(0);
  /** Result: the least eligible backlog per slot (+Inf: none eligible). */
  pressure: f64 = Infinity;
  /** Result: the eligible candidate with the longest remembered prefix (-1: none). */
  affinity: i32 = -1;
  /** Result: candidates the model filter left out. */
  modelExcluded: i32 = 0;
}

export class CostParams {
  bytesPerToken: f64 = 4;
  blockBytes: i32 = 64;
  fallbackPrefillMs: f64 = 0.1;
  adapterLoadMs: f64 = 200;
  kvFull: f64 = 0.95;
}

export function scoreRequest(plan: Plan, lp: LlmPlan, inflightP: usize, nowMs: f64, rc: RequestCost, cp: CostParams): Scan {
  const n = plan.n;
  const checkStale = anyStale(plan, nowMs);
  const skipP = ptr(plan.skip), slotP = ptr(plan.slot), staleP = ptr(plan.staleAtMs), qP = ptr(plan.qAdj);
  const pwP = ptr(plan.pw), satP = ptr(plan.satAt), costP = ptr(plan.cost), slotsP = ptr(plan.slots);
  const skippedP = ptr(plan.skipped);
  const col = lp.hasData ? rc.modelCol : -1;
  let best = Infinity;
  let eligible = 0;
  let saturated = 0;
  let pressure = Infinity;
  let excluded = 0;
  let affinity = -1;
  let affinityBlocks = 0;
  for (let i = 0; i < n; i++) {
    let skip = i32At(skipP, i);
    if (checkStale && skip == SKIP_NONE && nowMs >= f64At(staleP, i)) skip = SKIP_STALE;
    if (skip != SKIP_NONE) {
      const at = skippedP + (<usize>skip << 3);
      store<i64>(at, load<i64>(at) + 1);
      setF64At(costP, i, Infinity);
      continue;
    }
    const extra = modelCostMs(lp, col, i, cp.adapterLoadMs);
    if (extra == Infinity) { setF64At(costP, i, Infinity); excluded++; continue; }
    const kv = unchecked(lp.kv[i]);
    const blocks = unchecked(rc.cachedBlocks[i]);
    if (blocks > affinityBlocks) { affinityBlocks = blocks; affinity = i; }
    const cached = cachedTokens(blocks, cp.blockBytes, cp.bytesPerToken, kv, cp.kvFull);
    const s = serviceMs(rc.promptTokens, cached, rc.outTokens, unchecked(lp.prefillMs[i]), unchecked(lp.decodeMs[i]),
      cp.fallbackPrefillMs, unchecked(lp.esMs[i]));
    let b = f64At(qP, i) + <f64>i32At(inflightP, i32At(slotP, i));
    if (b < 0) b = 0;
    const inv = unchecked(lp.inv[i]);
    const c = unchecked(lp.restMs[i]) * inv + (s + extra) * inv + b * f64At(pwP, i);
    setF64At(costP, i, c);
    eligible++;
    if (c < best) best = c;
    if (b >= f64At(satP, i)) saturated++;
    let pr = b / f64At(slotsP, i);
    if (kv >= cp.kvFull && pr < 1) pr = 1;
    if (pr < pressure) pressure = pr;
  }
  rc.pressure = pressure;
  rc.modelExcluded = excluded;
  rc.affinity = affinity;
  const sc = plan.scan;
  sc.eligible = eligible;
  sc.saturated = saturated;
  sc.best = best;
  return sc;
}
