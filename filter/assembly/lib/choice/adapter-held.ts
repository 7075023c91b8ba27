// LoRA adapters this proxy has requests in flight for, per instance: sent and not ended, whether
// they stream yet or not (an AdapterStreams table fed at the send instead of the first byte,
// plugin/stream.ts). The stream table (adapter-streams.ts) sees an adapter only once its answer
// streams; its requests queued or in prefill are invisible there, and the scrape (up to a second
// old) may still show an adapter loaded that the engine has since evicted. vLLM evicts a resident
// adapter only when none of its requests runs and another adapter waits for a slot. In
// bench/llm-routing at 2× overload (seed 3, docs/benchmarks/llm-r8c.md) the scrape showed
// code-lora loaded on an instance with both slots held and chat-lora waiting; code-lora's last
// request there ended, chat-lora took its slot, and the filter, still pricing code-lora as loaded
// (extra 0) on an instance whose queued adapter requests held no KV, sent it five code-lora
// requests that waited 0.8–0.9 s for a slot (11 of the 14 critical TTFTs over 800 ms). So, for a
// request for adapter A at instance i, with the counts of this proxy's requests in flight:
//  - max_loras other adapters have requests in flight at i and A none: A waits for one of them to
//    drain (their requests hold or await the slots);
//  - the scrape showed A loaded with every slot held and another adapter waiting there, and this
//    proxy has no A request in flight at i (none streaming from any VM either): A's slot goes to
//    the waiter once its requests end — A is priced as a drain there.
// Where this proxy has A requests in flight, queued or not, A stays pinned (they run as soon as
// the budget allows), which the round-8c rule keyed on streams alone could not tell (it priced A
// as a drain on instances its own queued requests pinned, and lost on 4 of 6 paths).
// Bounded as the stream table: PER_SLOT adapters per in-flight slot, slots grow with the fleet.
import { MODEL_LOADED, MODEL_WAITING } from "../snapshot-llm";
import { LlmPlan } from "./plan-llm";
import { AdapterStreams, STREAMS_FULL } from "./adapter-streams";

/** Whether another adapter than column `col` waits for a LoRA slot on candidate i (scrape, or marked by a send since). */
export function otherWaiting(lp: LlmPlan, col: i32, i: i32): bool {
  const cols = lp.names.length;
  for (let c = 0; c < cols; c++) {
    if (c == col || unchecked(lp.isBase[c])) continue;
    if ((lp.flagsOf(c, i) & MODEL_WAITING) != 0) return true;
  }
  return false;
}

/** Whether the scrape's loaded adapter `col` at candidate i is promised to a waiter: every slot held, another adapter waiting, none of its requests in flight here. */
export function slotPromised(lp: LlmPlan, held: AdapterStreams, streams: AdapterStreams, col: i32, i: i32, slot: i32): bool {
  if ((unchecked(lp.snapFlags[col * lp.n + i]) & MODEL_LOADED) == 0) return false;
  if (unchecked(lp.loraRoom[i]) != 0) return false;   // a free slot (or unknown: −1) keeps it resident
  const h = unchecked(lp.hashes[col]);
  if (held.streaming(slot, h) > 0 || streams.streaming(slot, h) > 0) return false;
  return otherWaiting(lp, col, i);
}

/**
 * The extra cost (ms) of candidate i for adapter column `col` once this proxy's in-flight adapter
 * requests (`held`) are known, from the streams' (adapter-streams.ts streamedCostMs: `extra`): a
 * drain (adapterLoadMs + E[S]) where max_loras other adapters have requests in flight or where the
 * loaded adapter's slot is promised to a waiter; else `extra`. Where the adapter streams
 * (`run[i]` 1) it joins the batch: `extra` unchanged. Base models and columns < 0 keep `extra`.
 */
export function heldCostMs(lp: LlmPlan, held: AdapterStreams, streams: AdapterStreams, col: i32, i: i32, slot: i32, extra: f64, adapterLoadMs: f64, run: StaticArray<u8>): f64 {
  if (col < 0 || unchecked(lp.isBase[col]) || unchecked(run[i]) != 0) return extra;
  const drain = adapterLoadMs + unchecked(lp.esMs[i]);
  if (extra >= drain) return extra;
  const h = unchecked(lp.hashes[col]);
  if (held.state(slot, h, unchecked(lp.maxLoras[i])) == STREAMS_FULL || slotPromised(lp, held, streams, col, i, slot)) return drain;
  return extra;
}
