// Glue for load-aware choice: per-snapshot candidate plans, the shared in-flight table and the
// metrics. Decisions themselves live in lib/choose.ts.
import { LoadAwareService, PluginConfig, STATUS_DEGRADED } from "../lib/config";
import { Snapshot } from "../lib/snapshot";
import { Candidate, candidateFrom, Plan, SKIP_REASONS, skipName } from "../lib/choose";
import { Inflight, Rng } from "../lib/inflight";
import { defineMetric, incrementMetric, METRIC_COUNTER } from "../abi/host";

export class ServicePlan {
  plan: Plan = new Plan([]);
  constructor(public cfg: LoadAwareService) {}
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
  rng: Rng = new Rng(1);
  allIneligiblePending: i64 = 0;
  endpointHeader: ArrayBuffer = String.UTF8.encode("x-switchyard-endpoint");
  degradedHeader: ArrayBuffer = new ArrayBuffer(0);
  debugHeader: ArrayBuffer = new ArrayBuffer(0);
  trueValue: ArrayBuffer = String.UTF8.encode("true");
  skipMetrics: StaticArray<u32> = new StaticArray<u32>(SKIP_REASONS);
  allIneligibleMetric: u32 = 0;
  choiceMetrics: Map<string, u32> = new Map();

  configure(cfg: PluginConfig, seed: u32): void {
    const la = cfg.loadAware;
    this.endpointHeader = String.UTF8.encode(la.endpointHeader);
    this.degradedHeader = String.UTF8.encode(la.degradedHeader);
    this.debugHeader = String.UTF8.encode(la.debugHeader);
    this.rng = new Rng(seed);
    this.plans = [];
    for (let i = 0; i < la.services.length; i++) this.plans.push(new ServicePlan(la.services[i]));
    for (let r = 1; r < SKIP_REASONS; r++) this.skipMetrics[r] = defineMetric(METRIC_COUNTER, "switchyard.lb.skip." + skipName(r));
    this.allIneligibleMetric = defineMetric(METRIC_COUNTER, "switchyard.lb.all_ineligible");
  }

  choiceMetric(service: string, addr: string): u32 {
    const key = service + "|" + addr;
    if (this.choiceMetrics.has(key)) return this.choiceMetrics.get(key);
    const id = defineMetric(METRIC_COUNTER, "switchyard.lb.choice." + sanitize(service) + "." + sanitize(addr));
    this.choiceMetrics.set(key, id);
    return id;
  }

  /** Hands the counts gathered on the request path to the host (on tick). */
  flush(): void {
    for (let i = 0; i < this.plans.length; i++) {
      const p = this.plans[i].plan;
      for (let j = 0; j < p.n; j++) {
        const n = p.chosen[j];
        if (n != 0) { incrementMetric(p.metricId[j], n); p.chosen[j] = 0; }
      }
      for (let r = 1; r < SKIP_REASONS; r++) {
        const n = p.skipped[r];
        if (n != 0) { incrementMetric(this.skipMetrics[r], n); p.skipped[r] = 0; }
      }
    }
    if (this.allIneligiblePending != 0) { incrementMetric(this.allIneligibleMetric, this.allIneligiblePending); this.allIneligiblePending = 0; }
  }

  /** Rebuilds every plan from a snapshot (null: no data, every service all-ineligible). */
  rebuild(cfg: PluginConfig, snap: Snapshot | null, stale: bool): void {
    this.flush();
    for (let i = 0; i < this.plans.length; i++) {
      const sp = this.plans[i];
      const cands = new Array<Candidate>();
      if (snap == null) { sp.plan = new Plan(cands, sp.cfg.maxUtilization); continue; }
      for (let j = 0; j < snap.instances.length; j++) {
        const inst = snap.instances[j];
        if (inst.service != sp.cfg.service) continue;
        const c = candidateFrom(inst, sp.cfg.model, <f64>sp.cfg.stalenessMs, <f64>snap.generatedAtMs,
          linkDegraded(cfg, snap, stale, inst.peer), linkRttMs(snap, inst.peer));
        c.slot = this.inflight.slotFor(inst.addr);
        c.inflightAtSnapshot = this.inflight.rebase(c.slot, c.scrapeAtMs);
        c.metricId = this.choiceMetric(sp.cfg.service, inst.addr);
        cands.push(c);
      }
      sp.plan = new Plan(cands, sp.cfg.maxUtilization);
    }
  }
}

/** Measured round trip to `peer` (EWMA; the last sample if no average yet; 0 if unknown or local). */
export function linkRttMs(snap: Snapshot, peer: string): f64 {
  if (peer.length == 0) return 0;
  const i = snap.peerIndex(peer);
  if (i < 0) return 0;
  const p = snap.peers[i];
  if (p.avgRttMs == p.avgRttMs && p.avgRttMs > 0) return <f64>p.avgRttMs; // not NaN
  if (p.lastRttMs == p.lastRttMs && p.lastRttMs > 0) return <f64>p.lastRttMs;
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
