// Filter + scorer, per request: model and LoRA affinity. With LLM data in the snapshot only the
// instances that serve the requested model are candidates: as a base model or a loaded adapter
// (no extra cost), an adapter requests already wait for (it is being loaded: adapterLoadMs), or,
// for an adapter the instance lists but has not loaded, adapter capacity left (it must load it:
// adapterLoadMs; + E[S] when adapters this proxy sent since the scrape took the free slots,
// adapter-sends.ts). An instance at capacity without the adapter is left out.
import { MODEL_BASE, MODEL_LOADED, MODEL_WAITING } from "../snapshot-llm";
import { LlmPlan, MODEL_LISTED } from "./plan-llm";

/** Extra cost (ms, before de-weighting) of candidate i for model column `col`; +Inf: does not serve it. col < 0: no restriction. */
@inline export function modelCostMs(lp: LlmPlan, col: i32, i: i32, adapterLoadMs: f64): f64 {
  if (col < 0) return 0;
  const f = lp.flagsOf(col, i);
  if ((f & (MODEL_BASE | MODEL_LOADED)) != 0) return 0;
  const room = unchecked(lp.loraRoom[i]);
  // waiting with a slot free: it is being loaded; with every slot held by running adapters it
  // waits for one of them to drain, which the other adapters' traffic can put off indefinitely
  if ((f & MODEL_WAITING) != 0) return room > 0 ? adapterLoadMs : adapterLoadMs + unchecked(lp.esMs[i]);
  // room to load it only where the instance lists the adapter (/v1/models): another base model's
  // instance with free LoRA slots cannot serve it
  if ((f & MODEL_LISTED) == 0 || unchecked(lp.isBase[col]) || room <= 0) return Infinity;
  // the free slots the scrape showed are taken by adapters this proxy sent since: it waits for a
  // running adapter's requests to drain (about one service time) before its own can load
  return unchecked(lp.loraSent[i]) < room ? adapterLoadMs : adapterLoadMs + unchecked(lp.esMs[i]);
}
