// Glue for cross-VM in-flight counts (lib/xvm.ts): this VM's gauges written at every send and end,
// the other VMs' read for the two p2c candidates before a pick, and the gauge map exchanged in
// shared data on the tick. Host calls per request with W worker VMs: 2 stores (send, end) and
// 2 (W − 1) loads (p2c path; none on the full scan).
import {
  defineMetric, recordMetric, getMetric, getSharedData, setSharedData, CAS_MISMATCH, METRIC_GAUGE, log, LOG_WARN,
} from "../abi/host";
import { XvmMap, GaugeIds, xvmGaugeName, peekPair, peerCount, gaugesHold, XVM_MAX_PEERS } from "../lib/xvm";
import { Inflight, Rng, NO_HOLD } from "../lib/inflight";
import { Plan } from "../lib/choose";
import { InbandTable } from "../lib/inband";

const XVM_KEY = String.UTF8.encode("switchyard.xvm.v1");
const NONE: u32 = 0xffffffff;

/** Gauge ids by (token, slot), defined once: bounded by the VMs' slot counts (live fleet + grace churn). */
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
  /** This VM's gauge id per slot (NONE: not defined yet) and the count last stored there. */
  private own: Array<u32> = [];
  private stored: Array<i32> = [];
  /** The token the gauges are named by: this VM's first (kept across reconfigurations, so the names are). */
  private token: u32 = 0;
  private pair: StaticArray<i32> = new StaticArray<i32>(2);
  private values: StaticArray<u64> = new StaticArray<u64>(XVM_MAX_PEERS);
  /** False once a read-back of this VM's own gauge disagreed (gaugesHold): no gauge is read since. */
  private readable: bool = true;

  configure(on: bool, token: u32, inband: InbandTable): void {
    this.on = on;
    if (this.token == 0) this.token = token;
    if (!on) { this.map.vms = 1; inband.vms = 1; }
  }

  /** This VM's count on `slot` into its gauge (defined on the slot's first use). */
  private store(slot: i32, inflight: Inflight): void {
    while (this.own.length <= slot) { this.own.push(NONE); this.stored.push(0); }
    let id = unchecked(this.own[slot]);
    if (id == NONE) { id = this.gauges.id(this.token, slot); unchecked(this.own[slot] = id); }
    const c = unchecked(inflight.local[slot]);
    recordMetric(id, <u64>c);
    unchecked(this.stored[slot] = c);
  }

  /** A request was sent to `slot` (after Inflight.acquire). */
  @inline sent(slot: i32, inflight: Inflight, nowMs: f64): void {
    if (!this.on) return;
    this.map.lastSendMs = nowMs;
    this.store(slot, inflight);
  }

  /** A request ended (after Inflight.release of `handle`): nothing if its slot was freed since. */
  @inline ended(handle: i64, inflight: Inflight): void {
    if (!this.on || handle == NO_HOLD) return;
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
      const doc = this.map.merge(cur.found ? cur.value : new ArrayBuffer(0), this.token, now, maxAge, inflight, this.gauges);
      const r = setSharedData(XVM_KEY, doc, cur.found ? cur.cas : 0);
      if (r != CAS_MISMATCH) break;
    }
    inband.vms = this.map.vms;
  }
}
