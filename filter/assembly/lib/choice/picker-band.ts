// Picker: uniformly among the candidates whose cost is within (1 + band) of the cheapest
// (band 0: always the cheapest; deterministic, which the tests use).
import { Rng } from "../inflight";
import { Pick, Plan } from "./plan";
import { ptr, f64At } from "./flat";

/** Picks from a scored plan (plan.cost: +Inf = out) whose cheapest cost is `best`. */
export function bandPick(plan: Plan, best: f64, band: f64, rng: Rng, p: Pick): void {
  const n = plan.n;
  const costP = ptr(plan.cost);
  const limit = best * (1 + band);
  let inBand = 0;
  for (let i = 0; i < n; i++) if (f64At(costP, i) <= limit) inBand++;
  p.considered = inBand;
  let k = <i32>(rng.next() * <f64>inBand);
  if (k >= inBand) k = inBand - 1;
  for (let i = 0; i < n; i++) {
    if (f64At(costP, i) <= limit) {
      if (k == 0) { p.index = i; return; }
      k--;
    }
  }
}
