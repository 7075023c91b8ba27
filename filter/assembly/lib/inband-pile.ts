// The pile (InbandTable.pileOf, docs/inband.md): outstanding requests to an instance against what
// its usual whole time explains at the send rate (Little's law), (n + 1) / (λ·L + 1).
//
// With cross-VM counts (InbandTable.wide, lib/xvm.ts) both sides are the proxy's, not this VM's:
// n adds the other VMs' outstanding requests (their gauges at the last read, else their tick
// counts) and λ the other VMs' send rates (a tick old). The count alone proxy-wide is a feedback
// (robust-r8 `xg-G`): a VM that sends less to an instance expects less there, reads the other
// VM's requests as a pile and sends still less -- the VMs specialise. The burst term (sends since
// the tick) and the fair-share cap are this VM's, scaled by the VMs sending (`vms`).
import { InbandTable } from "./inband";

/** The pile of slot s at n of this VM's requests outstanding; 1 with nothing outstanding. */
export function pileAt(t: InbandTable, s: i32, n: i32): f64 {
  const w = t.wide;
  let all = n;
  let rate = unchecked(t.rate[s]);
  let k: f64 = 1;
  if (w != null) {
    const wide = w;
    if (s < wide.remote.length) { const r = unchecked(wide.remote[s]); if (r > 0) all += r; }
    if (s < wide.peerRate.length) rate += unchecked(wide.peerRate[s]);
    k = wide.vms;
  }
  if (all <= 0) return 1;
  const L = unchecked(t.allRef[s]) > 0 ? unchecked(t.allRef[s]) : unchecked(t.esScrape[s]);
  if (!(L > 0)) return 1;
  // the sends since the last tick are outstanding at the usual latency too (the tick folds them
  // into the rate): without them a burst between two ticks read as a pile on an idle instance
  const expect = rate * L + <f64>unchecked(t.sends[s]) * k;
  const fair = unchecked(t.fairN[s]) * k;
  return (<f64>all + 1) / ((expect < fair ? expect : fair) + 1);
}
