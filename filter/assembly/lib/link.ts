// Link-status decisions: what `x-cross-cloud-status` each configured service gets, given the
// latest snapshot and whether it is stale. Computed once per (snapshot, staleness) change, so
// the request path only indexes an array.
import { LinkConfig, STATUS_DEGRADED, STATUS_NORMAL } from "./config";
import { Snapshot } from "./snapshot";

export const REASON_SNAPSHOT: u8 = 0;   // decided from the agent's data
export const REASON_MISSING: u8 = 1;    // no snapshot yet (agent never answered)
export const REASON_STALE: u8 = 2;      // snapshot older than stalenessMs
export const REASON_UNKNOWN_PEER: u8 = 3; // snapshot does not know the configured peer

export class LinkView {
  status: StaticArray<i32>;
  reason: StaticArray<u8>;
  constructor(n: i32) {
    this.status = new StaticArray<i32>(n);
    this.reason = new StaticArray<u8>(n);
  }
  /** True when the decision came from the fail mode rather than from agent data. */
  isFailMode(i: i32): bool { return this.reason[i] != REASON_SNAPSHOT; }
}

export function resolveLink(cfg: LinkConfig, snap: Snapshot | null, stale: bool): LinkView {
  const n = cfg.services.length;
  const v = new LinkView(n);
  for (let i = 0; i < n; i++) {
    if (snap == null) { v.status[i] = cfg.failMode; v.reason[i] = REASON_MISSING; continue; }
    if (stale) { v.status[i] = cfg.failMode; v.reason[i] = REASON_STALE; continue; }
    const p = snap.peerIndex(cfg.services[i].peer);
    if (p < 0) { v.status[i] = cfg.failMode; v.reason[i] = REASON_UNKNOWN_PEER; continue; }
    v.status[i] = snap.peers[p].degraded ? STATUS_DEGRADED : STATUS_NORMAL;
    v.reason[i] = REASON_SNAPSHOT;
  }
  return v;
}
