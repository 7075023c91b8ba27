// LoRA adapters this proxy sent to an instance that had not loaded them, until a scrape shows it.
//
// The snapshot says which adapters each instance runs and how many more it can hold (plan-llm.ts
// loraRoom). Between scrapes that goes stale: requests for two different adapters sent to an
// instance with one free LoRA slot both counted on that slot, and the second waited until a
// running adapter drained (vLLM cannot swap an adapter out while requests use it; those LoRA
// requests were the prefix-heavy TTFT tail in bench/llm-routing). So a request sent with an
// adapter the instance must load marks it there as being loaded (MODEL_WAITING: the next requests
// for it join at adapterLoadMs) and counts one LoRA slot taken (loraSent); filter-model.ts prices
// an adapter that would need a slot beyond the free ones as a wait for a drain, not an exclusion
// (the set of eligible instances stays what the scrape says). The mark is re-applied to every plan
// rebuilt from a scrape older than the send and dropped once a scrape after it is in force.
// Bounded: at most CAPACITY sends remembered (the oldest forgotten first), each for maxAgeMs.
import { MODEL_BASE, MODEL_LOADED, MODEL_WAITING } from "../snapshot-llm";
import { LlmPlan } from "./plan-llm";

export const ADAPTER_SENDS_CAPACITY: i32 = 256;

export class AdapterSends {
  private slot: StaticArray<i32> = new StaticArray<i32>(ADAPTER_SENDS_CAPACITY);
  private model: Array<string> = new Array<string>(ADAPTER_SENDS_CAPACITY);
  private at: StaticArray<f64> = new StaticArray<f64>(ADAPTER_SENDS_CAPACITY);
  private next: i32 = 0;
  /** Sends remembered. */
  count: i32 = 0;

  constructor(public maxAgeMs: f64 = 10000) {
    for (let k = 0; k < ADAPTER_SENDS_CAPACITY; k++) { this.model[k] = ""; unchecked(this.slot[k] = -1); }
  }

  /**
   * A request for model column `col` was sent to candidate i (in-flight slot `slot`) at `nowMs`:
   * when that is an adapter the instance has neither loaded nor waiting, it is now being loaded
   * there. Returns whether it was marked.
   */
  sent(lp: LlmPlan, col: i32, i: i32, slot: i32, nowMs: f64): bool {
    if (!mark(lp, col, i)) return false;
    const k = this.next;
    if (unchecked(this.slot[k]) < 0) this.count++;
    unchecked(this.slot[k] = slot);
    this.model[k] = unchecked(lp.names[col]);
    unchecked(this.at[k] = nowMs);
    this.next = (k + 1) % ADAPTER_SENDS_CAPACITY;
    return true;
  }

  /** Mark k's in-flight slot (−1: none) and adapter name, k in 0..ADAPTER_SENDS_CAPACITY (adapter-share.ts publishes them). */
  @inline slotAt(k: i32): i32 { return unchecked(this.slot[k]); }
  @inline modelAt(k: i32): string { return unchecked(this.model[k]); }

  /**
   * After a plan rebuild: the sends newer than the scrape each candidate's data comes from are
   * marked again (`scrapeAtMs` and `slots` in plan order); the others are forgotten.
   */
  reapply(lp: LlmPlan, slots: StaticArray<i32>, scrapeAtMs: Array<f64>, nowMs: f64): void {
    for (let k = 0; k < ADAPTER_SENDS_CAPACITY; k++) {
      const s = unchecked(this.slot[k]);
      if (s < 0) continue;
      const at = unchecked(this.at[k]);
      let keep = nowMs - at <= this.maxAgeMs;
      if (keep) {
        keep = false;
        for (let i = 0; i < lp.n && i < slots.length; i++) {
          if (unchecked(slots[i]) != s) continue;
          // a scrape taken after the send shows the adapter (or its absence) itself
          if (scrapeAtMs[i] < at) {
            keep = true;
            const col = lp.modelColumn(this.model[k]);
            if (col >= 0) mark(lp, col, i);
          }
          break;
        }
      }
      if (!keep) { unchecked(this.slot[k] = -1); this.model[k] = ""; this.count--; }
    }
  }
}

/** Marks adapter column `col` as being loaded on candidate i, counting a LoRA slot taken; false when it is a base model or already there. */
export function mark(lp: LlmPlan, col: i32, i: i32): bool {
  if (col < 0 || i < 0 || i >= lp.n || col >= lp.names.length) return false;
  if (unchecked(lp.isBase[col])) return false;
  const f = lp.flagsOf(col, i);
  if ((f & (MODEL_BASE | MODEL_LOADED | MODEL_WAITING)) != 0) return false;
  unchecked(lp.flags[col * lp.n + i] = f | MODEL_WAITING);
  unchecked(lp.loraSent[i]++);
  return true;
}
