// Two distinct uniform draws from m >= 2 items, in two calls so that nothing is allocated:
// first = drawFirst(rng, m); second = drawSecond(rng, m, first).
import { Rng } from "../inflight";

@inline export function drawFirst(rng: Rng, m: i32): i32 { return <i32>(rng.next() * <f64>m) % m; }

/** Uniform over the m − 1 items other than `first`. */
@inline export function drawSecond(rng: Rng, m: i32, first: i32): i32 {
  const k = <i32>(rng.next() * <f64>(m - 1)) % (m - 1);
  return k >= first ? k + 1 : k;
}
