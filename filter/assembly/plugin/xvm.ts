// Glue for cross-VM in-flight counts (lib/xvm.ts): this VM's gauges written at every send and end,
// the other VMs' read for the two p2c candidates before a pick, and the gauge map exchanged in
// shared data on the tick, after the VM renewed its gauge name (lib/xvm-names.ts). Host calls per
// request with W worker VMs: 2 stores (send, end) and 2 (W − 1) loads (p2c path; none on the full
// scan).
import {
  defineMetric, recordMetric, getMetric, getSharedData, setSharedData, CAS_MISMATCH, OK, METRIC_GAUGE, log, LOG_WARN, nowMs,
} from "../abi/host";
import { XvmMap, GaugeIds, xvmGaugeName, peekPair, peerCount, gaugesHold, XVM_MAX_PEERS, XVM_NO_GAUGE } from "../lib/xvm";
import { NameClaim, claimName } from "../lib/xvm-names";
import { Inflight, Rng, NO_HOLD } from "../lib/inflight";
import { Plan } from "../lib/choose";
import { InbandTable } from "../lib/inband";

const XVM_KEY = String.UTF8.encode("switchyard.xvm.v1");
const NAMES_KEY = String.UTF8.encode("switchyard.xvm.names.v1");
const NONE: u32 = XVM_NO_GAUGE;

/** Gauge ids by (name, slot), defined once: bounded by the names in the pool × the VMs' slot counts (live fleet + grace churn). */
class HostGauges extends GaugeIds {
  private byKey: Map<u64, u32> = new Map();
  id(token: u32, slot: i32): u32 {
    const key = (<u64>token << 32) | <u64><u32>slot;
    if (this.byKey.has(key)) return this.byKey.get(key);
    const id = defineMetric(METRIC_GAUGE, xvmGaugeName(token, slot));
    this.byKey.set(key, id);
    return id;
  }
}

export class CrossVm {
  on: bool = false;
  map: XvmMap = new XvmMap();
  private gauges: HostGauges = new HostGauges();
  /** This VM's gauge id per slot (NONE: not defined yet under its current name) and the count last stored there. */
  private own: Array<u32> = [];
  private stored: Array<i32> = [];
  /** This VM's token in the name pool: its first (kept across reconfigurations, so its name is). */
  private token: u32 = 0;
  /** The name the gauges are called by (lib/xvm-names.ts); 0 until one is held: nothing stored or listed. */
  name: u32 = 0;
  private claim: NameClaim = new NameClaim();
  private pair: StaticArray<i32> = new StaticArray<i32>(2);
  private values: StaticArray<u64> = new StaticArray<u64>(XVM_MAX_PEERS);
  /** False once a read-back of this VM's own gauge disagreed (gaugesHold): no gauge is read since. */
  private readable: bool = true;

  configure(on: bool, token: u32, inband: InbandTable, maxAgeMs: u64): void {
    this.on = on;
    if (this.token == 0) this.token = token;
    if (!on) { this.map.vms = 1; inband.vms = 1; return; }
    this.renew(nowMs(), maxAgeMs);
  }

  /**
   * Claims or renews this VM's name in the pool. A new name (the first, or another after this VM
   * stalled past maxAgeMs and lost its own) starts with no gauge defined: each is written before
   * it is listed. A pool that cannot be written keeps the name held (0: none).
   */
  private renew(now: u64, maxAgeMs: u64): void {
    for (let attempt = 0; attempt < 3; attempt++) {
      const cur = getSharedData(NAMES_KEY);
      const c = claimName(cur.found ? cur.value : new ArrayBuffer(0), this.token, now, maxAgeMs, this.claim);
      const r = setSharedData(NAMES_KEY, c.doc, cur.found ? cur.cas : 0);
      if (r == CAS_MISMATCH) continue;
      if (r == OK && c.name != this.name) {
        this.name = c.name;
        for (let s = 0; s < this.own.length; s++) { unchecked(this.own[s] = NONE); unchecked(this.stored[s] = 0); }
      }
      return;
    }
  }

  /** This VM's count on `slot` into its gauge (defined on the slot's first use). */
  private store(slot: i32, inflight: Inflight): void {
    while (this.own.length <= slot) { this.own.push(NONE); this.stored.push(0); }
    let id = unchecked(this.own[slot]);
    if (id == NONE) { id = this.gauges.id(this.name, slot); unchecked(this.own[slot] = id); }
    const c = unchecked(inflight.local[slot]);
    recordMetric(id, <u64>c);
    unchecked(this.stored[slot] = c);
  }

  /** A request was sent to `slot` (after Inflight.acquire). */
  @inline sent(slot: i32, inflight: Inflight, nowMs: f64): void {
    if (!this.on || this.name == 0) return;
    this.map.lastSendMs = nowMs;
    this.store(slot, inflight);
  }

  /** A request ended (after Inflight.release of `handle`): nothing if its slot was freed since. */
  @inline ended(handle: i64, inflight: Inflight): void {
    if (!this.on || this.name == 0 || handle == NO_HOLD) return;
    const slot = <i32>(handle & 0xffffffff);
    if (slot < inflight.gen.length && <i64>unchecked(inflight.gen[slot]) == (handle >>> 32)) this.store(slot, inflight);
  }

  /** Before a p2c pick: the other VMs' counts on the two candidates it will draw, from their gauges. */
  readPair(plan: Plan, rng: Rng, nowMs: f64, inflight: Inflight): void {
    if (!this.on || !this.readable || !peekPair(plan, rng, nowMs, this.pair)) return;
    this.read(unchecked(this.pair[0]), inflight);
    this.read(unchecked(this.pair[1]), inflight);
  }

  private read(s: i32, inflight: Inflight): void {
    const m = this.map;
    if (s >= m.n.length) return;
    const k = unchecked(m.n[s]);
    if (k <= 0) return;
    const v = this.values;
    for (let j = 0; j < k; j++) unchecked(v[j] = getMetric(unchecked(m.ids[s * XVM_MAX_PEERS + j])));
    const c = peerCount(k, v);
    if (c >= 0) inflight.setRemote(s, c);
  }

  /**
   * Tick, after the in-flight merge: every gauge of this VM holds its slot's count (a freed slot's
   * is 0: its streams store nothing when they end), then the gauge map is exchanged and the VMs
   * sending counted for the error price (InbandTable.vms).
   */
  tick(now: u64, maxAge: u64, inflight: Inflight, inband: InbandTable): void {
    if (!this.on) return;
    this.renew(now, maxAge);
    if (this.name == 0) return;
    // an active VM lists every live slot: each gauge defined and written under this name first
    // (a VM that sends nothing, the main-thread VM, lists nothing and defines nothing)
    if (this.map.active(<f64>now, inflight)) {
      const live = inflight.liveList();
      for (let k = 0; k < live.length; k++) {
        const s = unchecked(live[k]);
        if (s >= this.own.length || unchecked(this.own[s]) == NONE) this.store(s, inflight);
      }
    }
    const n = this.own.length;
    let probe = -1;
    for (let s = 0; s < n; s++) {
      const id = unchecked(this.own[s]);
      if (id == NONE) continue;
      const c = s < inflight.local.length ? unchecked(inflight.local[s]) : 0;
      if (c != unchecked(this.stored[s])) { recordMetric(id, <u64>c); unchecked(this.stored[s] = c); }
      if (probe < 0 && c > 0) probe = s;
    }
    // one read-back per tick while readable: a host that does not keep the gauges turns the reads off
    if (this.readable && probe >= 0 && !gaugesHold(unchecked(this.stored[probe]), getMetric(unchecked(this.own[probe])))) {
      this.readable = false;
      log(LOG_WARN, "switchyard: cross-VM gauges do not hold their values (a stats_matcher rejecting wasmcustom.switchyard.xvm.*?): the other VMs' counts as of their last tick only");
    }
    for (let attempt = 0; attempt < 3; attempt++) {
      const cur = getSharedData(XVM_KEY);
      const doc = this.map.merge(cur.found ? cur.value : new ArrayBuffer(0), this.name, now, maxAge, inflight, this.gauges, this.own);
      const r = setSharedData(XVM_KEY, doc, cur.found ? cur.cas : 0);
      if (r != CAS_MISMATCH) break;
    }
    inband.vms = this.map.vms;
  }
}
