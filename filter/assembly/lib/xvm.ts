// Cross-VM in-flight counts per instance through Envoy gauges (docs/inband.md "Across worker
// VMs", docs/benchmarks/robust-r15a.md). Envoy runs one VM per worker; the in-flight document
// (lib/inflight.ts) tells each VM the others' counts as of their last tick (refreshMs). A gauge is
// the one cross-worker state a filter can read between ticks without a lock or a copy (Envoy
// Context::defineMetric makes it in the plugin's scope, one stat per name across the workers;
// incrementMetric / recordMetric / getMetric are an atomic add, store and load on it).
//
// Each VM keeps one gauge per in-flight slot of its own, `switchyard.xvm.inflight.<name>.<slot>`
// (<name>: the VM's name from a pool the VMs share, lib/xvm-names.ts, so the names do not grow
// with VM restarts),
// holding its own count there (recordMetric at every send and end: only its owner writes it, so a
// store is exact and never drifts). Slots are this VM's (lib/inflight.ts): bounded by the live
// fleet plus the addresses churned within the slot grace, reused when freed -- so the gauges are
// too (Envoy never frees a stat). Which gauge holds which address is published on the tick in a
// shared-data document of one section per VM (`switchyard.xvm.v1`, lib/shared-doc.ts framing, the
// value: the VM's slot for the address): a VM reads, for an address, the gauges the other live
// VMs' sections list. A VM that stopped ticking (failed, reconfigured) has its section expire and
// its gauges are no longer read; a VM that sent nothing within XVM_ACTIVE_MS (the main-thread VM,
// an idle worker) lists nothing, so nobody reads its gauges.
//
// The request path reads only the two candidates p2c will draw (peekPair: the same draws, the rng
// state left as it was); the full-scan path keeps the tick's counts. The in-band pile stays this
// VM's (lib/inband-pile.ts); the error price counts the VMs sending (InbandTable.vms, errScale).
import { AddrSections, AddrSectionWriter, concatSections } from "./shared-doc";
import { Inflight, Rng } from "./inflight";
import { Plan } from "./choice/plan";
import { anyStale } from "./choice/filter-stale";
import { drawFirst, drawSecond } from "./choice/draw";

/** Most other VMs whose gauges are read per instance; a slot listed by more keeps the tick's count. */
export const XVM_MAX_PEERS: i32 = 8;
/** A slot whose gauge this VM has not defined (the glue's `own` array, encodeOwn). */
export const XVM_NO_GAUGE: u32 = 0xffffffff;
/** A VM lists its gauges while it sent a request within this long, or holds one in flight. */
export const XVM_ACTIVE_MS: f64 = 1000;

/** The gauge holding VM `token`'s in-flight count on its slot `slot`. */
export function xvmGaugeName(token: u32, slot: i32): string {
  return "switchyard.xvm.inflight." + token.toString() + "." + slot.toString();
}

/** Resolves another VM's gauge (its token, its slot) to a metric id of this VM (the glue: defineMetric, cached). */
export abstract class GaugeIds {
  abstract id(token: u32, slot: i32): u32;
}

export class XvmMap {
  /** Per slot of this VM: the other VMs' gauge ids for its address (XVM_MAX_PEERS per slot). */
  ids: Array<u32> = [];
  /** Per slot: how many ids (0: no other VM lists the address; -1: more than XVM_MAX_PEERS, not read). */
  n: Array<i32> = [];
  /** This VM and the other VMs that listed gauges on their last tick. */
  vms: f64 = 1;
  /** This VM's latest send (any instance, ms). */
  lastSendMs: f64 = -Infinity;
  private writer: AddrSectionWriter = new AddrSectionWriter();

  /** Room for `n` slots (the in-flight table's capacity); a slot never listed reads nothing. */
  grow(n: i32): void {
    while (this.n.length < n) {
      this.n.push(0);
      for (let k = 0; k < XVM_MAX_PEERS; k++) this.ids.push(0xffffffff);
    }
  }

  /** Whether this VM lists its gauges: a send within XVM_ACTIVE_MS, or a request still in flight. */
  active(nowMs: f64, inflight: Inflight): bool {
    if (nowMs - this.lastSendMs <= XVM_ACTIVE_MS) return true;
    const live = inflight.liveList();
    for (let k = 0; k < live.length; k++) if (unchecked(inflight.local[unchecked(live[k])]) > 0) return true;
    return false;
  }

  /**
   * This VM's section: when active, every live slot's address and the slot -- with `own` (the
   * glue's gauge id per slot), only the slots whose gauge this VM has written, so that a gauge
   * name taken over from a VM gone (lib/xvm-names.ts) is never read before its new holder wrote it.
   */
  encodeOwn(token: u32, nowMs: u64, inflight: Inflight, own: Array<u32> | null = null): ArrayBuffer {
    const w = this.writer;
    w.begin();
    if (this.active(<f64>nowMs, inflight)) {
      const live = inflight.liveList();
      const addrs = inflight.addresses();
      for (let k = 0; k < live.length; k++) {
        const s = unchecked(live[k]);
        if (own != null && (s >= own.length || unchecked(own[s]) == XVM_NO_GAUGE)) continue;
        w.add(unchecked(addrs[s]), <u32>s);
      }
    }
    return w.finish(token, nowMs);
  }

  /**
   * Reads the document: for every live slot of this VM, the gauges the other live VMs list for its
   * address; `vms` = 1 + the VMs listing any. Returns the document to write back (expired sections
   * dropped, ours replaced). Never allocates a slot (the document is input).
   */
  merge(doc: ArrayBuffer, token: u32, nowMs: u64, maxAgeMs: u64, inflight: Inflight, gauges: GaugeIds, own: Array<u32> | null = null): ArrayBuffer {
    this.grow(inflight.capacity());
    const live = inflight.liveList();
    for (let k = 0; k < live.length; k++) unchecked(this.n[unchecked(live[k])] = 0);
    const r = new AddrSections(doc, token, nowMs, maxAgeMs);
    let vms: f64 = 1;
    let lastVm: u32 = 0;
    let any = false;
    while (r.next()) {
      if (!any || r.vm != lastVm) { vms += 1; lastVm = r.vm; any = true; }
      const s = inflight.slotOf(r.addr());
      if (s < 0 || s >= this.n.length) continue;
      const k = unchecked(this.n[s]);
      if (k < 0) continue;
      if (k >= XVM_MAX_PEERS) { unchecked(this.n[s] = -1); continue; }
      unchecked(this.ids[s * XVM_MAX_PEERS + k] = gauges.id(r.vm, <i32>load<u32>(r.valuePtr)));
      unchecked(this.n[s] = k + 1);
    }
    this.vms = vms;
    r.keep.push(this.encodeOwn(token, nowMs, inflight, own));
    return concatSections(r.keep);
  }
}

/**
 * The two candidates p2cFast (choice/picker-p2c.ts) will draw, as in-flight slots into `out`,
 * without moving the rng (its state is restored). False when p2cFast draws nothing (fewer than
 * two eligible, or some data may be stale: the full scan decides, on the tick's counts).
 */
export function peekPair(plan: Plan, rng: Rng, nowMs: f64, out: StaticArray<i32>): bool {
  const m = plan.nElig;
  if (m < 2 || anyStale(plan, nowMs)) return false;
  const saved = rng.state;
  const ka = drawFirst(rng, m);
  const kb = drawSecond(rng, m, ka);
  rng.state = saved;
  unchecked(out[0] = unchecked(plan.slot[unchecked(plan.elig[ka])]));
  unchecked(out[1] = unchecked(plan.slot[unchecked(plan.elig[kb])]));
  return true;
}

/**
 * The other VMs' count on slot `s` from their gauges' values (`values[j]` for the j-th listed id;
 * u64.MAX_VALUE: the host refused): their sum, or -1 when it cannot be read (no VM listed, more
 * than XVM_MAX_PEERS, a refused read) and the tick's count stands.
 */
export function peerCount(listed: i32, values: StaticArray<u64>): i32 {
  if (listed <= 0) return -1;
  let sum: u64 = 0;
  for (let j = 0; j < listed; j++) {
    const v = unchecked(values[j]);
    if (v == u64.MAX_VALUE || v > <u64>i32.MAX_VALUE) return -1;
    sum += v;
  }
  return sum > <u64>i32.MAX_VALUE ? -1 : <i32>sum;
}

/**
 * Whether this VM's gauges hold what it stored (a read-back of one gauge it stored `stored` > 0
 * into, `value`: getMetric's answer). Only the owner writes a gauge, so anything else means the
 * host does not keep them: a stat Envoy's stats_matcher rejects is a null gauge (stores dropped,
 * reads 0), a hot restart adds the parent's value (import mode Accumulate), a refused read is
 * u64.MAX_VALUE. Then the other VMs' gauges cannot be trusted either: the tick's counts stand.
 */
export function gaugesHold(stored: i32, value: u64): bool {
  return stored <= 0 || value == <u64>stored;
}
