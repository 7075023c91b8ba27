// Glue for load-aware choice: per-snapshot candidate plans, the shared in-flight table (bounded by
// the live fleet: slots of addresses gone from the snapshots for SLOT_GRACE_MS are freed) and the
// per-service metrics. Decisions themselves live in lib/choose.ts and lib/choice/.
import { LoadAwareService, PluginConfig, STATUS_DEGRADED, ALL_INELIGIBLE_REJECT } from "../lib/config";
import { Snapshot } from "../lib/snapshot";
import { Candidate, candidateFrom, Plan, SKIP_REASONS, skipName, MAX_FALLBACKS } from "../lib/choose";
import { Inflight, Rng } from "../lib/inflight";
import { PendingPrefill } from "../lib/pending-prefill";
import { InbandTable, InbandParams, Prober, probeEvery } from "../lib/inband";
import { InbandCounters, inbandParams } from "./inband";
import { defineMetric, incrementMetric, METRIC_COUNTER } from "../abi/host";
import { RequestPlan } from "./request-plan";
import { Holds } from "./body";
import { CrossVm } from "./xvm";

/**
 * How long the in-flight slot of an address that left the snapshots is kept: an instance that is
 * briefly missing (one scrape) keeps its counts; one that was replaced is forgotten. The table
 * holds the live fleet plus the addresses churned within the grace; at 100 addresses replaced
 * per second, 10 s keeps the tick at ~0.1 ms (30 s: ~0.3-0.5 ms, docs/architecture-choice.md).
 */
export const SLOT_GRACE_MS: f64 = 10000;
/** Sweeps run at most this often: the grace is coarse, and a sweep walks every slot. */
const SWEEP_EVERY_MS: f64 = 1000;

export class ServicePlan {
  plan: Plan = new Plan([]);
  /** switchyard.lb.choice.<service>: requests sent to an instance of the service. */
  choiceMetric: u32 = 0xffffffff;
  /** Request-aware state when the service has a `request` block (plugin/request-plan.ts). */
  req: RequestPlan | null = null;
  /** In-band learning (plugin/inband.ts): on for this service, its estimator parameters, its probe share. */
  inbandOn: bool = false;
  inbandParams: InbandParams = new InbandParams();
  prober: Prober = new Prober(0, 1000);
  constructor(public cfg: LoadAwareService) {
    const ib = cfg.inband;
    this.inbandOn = ib.enabled;
    this.inbandParams = inbandParams(ib);
    this.prober = new Prober(ib.enabled ? probeEvery(ib.probeShare) : 0, <f64>ib.probeIdleMs);
  }
}

function sanitize(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c == 0x2d;
    out += ok ? String.fromCharCode(c) : "_";
  }
  return out;
}

export class LoadAware {
  plans: Array<ServicePlan> = [];
  inflight: Inflight = new Inflight();
  /** Prefill sent ahead per in-flight slot (request-aware services), shared across VMs on the tick. */
  pending: PendingPrefill = new PendingPrefill();
  /** Some service chooses with the body: the pending prefill is exchanged on the tick. */
  requestAware: bool = false;
  inband: InbandTable = new InbandTable();
  inbandCounters: InbandCounters | null = null;
  rng: Rng = new Rng(1);
  allIneligiblePending: i64 = 0;
  endpointHeader: ArrayBuffer = String.UTF8.encode("x-switchyard-endpoint");
  degradedHeader: ArrayBuffer = new ArrayBuffer(0);
  debugHeader: ArrayBuffer = new ArrayBuffer(0);
  trueValue: ArrayBuffer = String.UTF8.encode("true");
  skipMetrics: StaticArray<u32> = new StaticArray<u32>(SKIP_REASONS);
  allIneligibleMetric: u32 = 0;
  nextSweepMs: f64 = 0;
  /** Scratch for the fallback order of one pick (lib/choice/fallbacks.ts; callbacks never nest). */
  fallbackScratch: StaticArray<i32> = new StaticArray<i32>(MAX_FALLBACKS);
  /** Streams held while their body is read (plugin/body.ts); the tick releases overdue ones. */
  holds: Holds = new Holds();
  /** Cross-VM in-flight counts through gauges (plugin/xvm.ts; loadAware.crossVm). */
  xvm: CrossVm = new CrossVm();

  configure(cfg: PluginConfig, seed: u32, vmToken: u32 = 0): void {
    const la = cfg.loadAware;
    this.xvm.configure(la.crossVm, vmToken, this.inband, cfg.sectionMaxAgeMs());
    this.endpointHeader = String.UTF8.encode(la.endpointHeader);
    this.degradedHeader = String.UTF8.encode(la.degradedHeader);
    this.debugHeader = String.UTF8.encode(la.debugHeader);
    this.rng = new Rng(seed);
    this.plans = [];
    this.requestAware = false;
    for (let i = 0; i < la.services.length; i++) {
      const sp = new ServicePlan(la.services[i]);
      // Per service, not per instance: Envoy never frees a stat, and instances churn.
      sp.choiceMetric = defineMetric(METRIC_COUNTER, "switchyard.lb.choice." + sanitize(sp.cfg.service));
      const rq = sp.cfg.request;
      if (rq != null) { sp.req = new RequestPlan(rq!, sanitize(sp.cfg.service)); this.requestAware = true; }
      this.plans.push(sp);
    }
    for (let r = 1; r < SKIP_REASONS; r++) this.skipMetrics[r] = defineMetric(METRIC_COUNTER, "switchyard.lb.skip." + skipName(r));
    this.allIneligibleMetric = defineMetric(METRIC_COUNTER, "switchyard.lb.all_ineligible");
    if (this.inbandCounters == null) this.inbandCounters = new InbandCounters();
  }

  /** Every tick: counters to the host, then frees the in-flight slots of addresses long gone. */
  onTick(nowMs: f64): void {
    this.holds.expire(nowMs);
    this.flush();
    if (nowMs >= this.nextSweepMs) {
      this.inflight.sweep(nowMs, SLOT_GRACE_MS);
      this.nextSweepMs = nowMs + SWEEP_EVERY_MS;
    }
    // freed slots start from nothing; factors decay and outstanding requests age
    // per-tick loops walk the live slots only (issue 24 #2: Inflight.liveList)
    const live = this.inflight.liveList();
    this.inband.sync(this.inflight.capacity(), this.inflight.gen, live);
    this.inband.fuseAll(nowMs, live);
    if (this.requestAware) this.pending.sync(this.inflight.capacity(), this.inflight.gen, live);
  }

  /** Hands the counts gathered on the request path to the host (on tick). */
  flush(): void {
    for (let i = 0; i < this.plans.length; i++) {
      const sp = this.plans[i];
      const p = sp.plan;
      let chosen: i64 = 0;
      for (let j = 0; j < p.n; j++) { chosen += p.chosen[j]; p.chosen[j] = 0; }
      if (chosen != 0) incrementMetric(sp.choiceMetric, chosen);
      const rq = sp.req;
      if (rq != null) rq.flush();
      for (let r = 1; r < SKIP_REASONS; r++) {
        const n = p.skipped[r];
        if (n != 0) { incrementMetric(this.skipMetrics[r], n); p.skipped[r] = 0; }
      }
    }
    if (this.allIneligiblePending != 0) { incrementMetric(this.allIneligibleMetric, this.allIneligiblePending); this.allIneligiblePending = 0; }
    const ic = this.inbandCounters;
    if (ic != null) ic.flush(this.inband);
  }

  /** Rebuilds every plan from a snapshot (null: no data, every service all-ineligible). */
  rebuild(cfg: PluginConfig, snap: Snapshot | null, stale: bool): void {
    this.flush();
    this.inflight.beginEpoch();
    for (let i = 0; i < this.plans.length; i++) {
      const sp = this.plans[i];
      const cands = new Array<Candidate>();
      const rq = sp.req;
      if (snap == null) {
        sp.plan = new Plan(cands, sp.cfg.maxUtilization);
        if (rq != null) rq.rebuild(sp.plan, sp.cfg.service, [], [], [], [], 0);
        continue;
      }
      for (let j = 0; j < snap.instances.length; j++) {
        const inst = snap.instances[j];
        if (inst.service != sp.cfg.service) continue;
        const slot = this.inflight.slotFor(inst.addr);
        const c = candidateFrom(inst, sp.cfg.model, <f64>sp.cfg.stalenessMs, <f64>snap.generatedAtMs,
          linkDegraded(cfg, snap, stale, inst.peer), linkRttMs(snap, inst.peer),
          sp.inbandOn && this.inband.liftsSlow(slot, unchecked(this.inflight.gen[slot])));
        c.slot = slot;
        c.inflightAtSnapshot = this.inflight.rebase(c.slot, c.scrapeAtMs);
        cands.push(c);
      }
      this.inband.sync(this.inflight.capacity(), this.inflight.gen, this.inflight.liveList());
      for (let j = 0; j < cands.length; j++) {
        const c = cands[j];
        this.inband.paramsOf[c.slot] = sp.inbandParams;
        this.inband.onScrape(c.slot, c.scrapeAtMs, c.perItemMs * c.slots, c.slots);
      }
      sp.plan = new Plan(cands, sp.cfg.maxUtilization);
      sp.plan.shedSaturated = sp.cfg.allIneligible == ALL_INELIGIBLE_REJECT;
      if (rq != null) {
        const es = new Array<f64>(cands.length), w = new Array<f64>(cands.length), at = new Array<f64>(cands.length);
        for (let k = 0; k < cands.length; k++) { es[k] = cands[k].perItemMs * cands[k].slots; w[k] = cands[k].weight; at[k] = cands[k].scrapeAtMs; }
        rq.rebuild(sp.plan, sp.cfg.service, snap.llm, es, w, at, <f64>snap.generatedAtMs);
      }
    }
    if (this.requestAware) this.pending.sync(this.inflight.capacity(), this.inflight.gen, this.inflight.liveList());
  }
}

/** Measured round trip to `peer` (EWMA; the last sample if no average yet; 0 if unknown or local). */
export function linkRttMs(snap: Snapshot, peer: string): f64 {
  if (peer.length == 0) return 0;
  const i = snap.peerIndex(peer);
  if (i < 0) return 0;
  const p = snap.peers[i];
  if (p.avgRttMs > 0 && p.avgRttMs < Infinity) return <f64>p.avgRttMs; // not NaN, not +Inf
  if (p.lastRttMs > 0 && p.lastRttMs < Infinity) return <f64>p.lastRttMs;
  return 0;
}

/** Whether the cross-cloud link to `peer` counts as degraded ("" = local cloud: never). */
export function linkDegraded(cfg: PluginConfig, snap: Snapshot, stale: bool, peer: string): bool {
  if (peer.length == 0) return false;
  if (stale) return cfg.link.failMode == STATUS_DEGRADED;
  const i = snap.peerIndex(peer);
  if (i < 0) return cfg.link.failMode == STATUS_DEGRADED;
  return snap.peers[i].degraded;
}
