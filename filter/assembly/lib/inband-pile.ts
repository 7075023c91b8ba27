// The pile (InbandTable.pileOf, docs/inband.md): our outstanding requests to an instance against
// what its usual whole time explains at our send rate (Little's law), (n + 1) / (λ·L + 1). This
// VM's count and rate: with cross-VM counts (lib/xvm.ts) the picker's backlog is the proxy's, but
// the pile stays this VM's -- the proxy's count and send rate here measured no better on the cells
// it was built for and worse on σ 2 (docs/benchmarks/robust-r15a.md; the count alone proxy-wide is
// a feedback that specialises the VMs, robust-r8 `xg-G`).
import { InbandTable } from "./inband";
import { getF, getI } from "./slot-array";

/** The pile of slot s at n of this VM's requests outstanding; 1 with nothing outstanding. */
export function pileAt(t: InbandTable, s: i32, n: i32): f64 {
  if (n <= 0) return 1;
  const ref = getF(t.allRef.dataStart, s);
  const L = ref > 0 ? ref : getF(t.esScrape.dataStart, s);
  if (!(L > 0)) return 1;
  // the sends since the last tick are outstanding at the usual latency too (the tick folds them
  // into the rate): without them a burst between two ticks read as a pile on an idle instance
  const own = getF(t.rate.dataStart, s) * L + <f64>getI(t.sends.dataStart, s);
  const fair = getF(t.fairN.dataStart, s);
  return (<f64>n + 1) / ((own < fair ? own : fair) + 1);
}
