// Filter metrics. Envoy stores Wasm-defined metrics under the `wasmcustom.` namespace and its
// /stats/prometheus strips that namespace: Prometheus sees `switchyard_link_decision_normal` etc.
// (no `envoy_` prefix, no `_total`). Counters are shared by all VMs of the plugin.
//
// Request-path counters are kept in wasm memory and flushed to the host on every tick
// (refreshMs): a host call per counter per request would cost more than the decision itself.
import { defineMetric, incrementMetric, METRIC_COUNTER, METRIC_GAUGE } from "../abi/host";

export class Counter {
  id: u32 = 0xffffffff;
  pending: i64 = 0;
  constructor(name: string) { this.id = defineMetric(METRIC_COUNTER, name); }
  @inline add(n: i64): void { this.pending += n; }
  flush(): void {
    if (this.pending != 0) { incrementMetric(this.id, this.pending); this.pending = 0; }
  }
}

/** Most per-(set, rule) counters per VM; decisions beyond it count in switchyard.rule.applied.overflow. */
export const MAX_RULE_COUNTERS: i32 = 256;

/** Metric-name segment: [A-Za-z0-9_] kept, everything else '_' (a '.' would nest the stat). */
function segment(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c == 0x5f;
    out += ok ? String.fromCharCode(c) : "_";
  }
  return out;
}

export class Metrics {
  decisionNormal: Counter = new Counter("switchyard.link.decision.normal");
  decisionDegraded: Counter = new Counter("switchyard.link.decision.degraded");
  failMode: Counter = new Counter("switchyard.link.failmode");
  headerStripped: Counter = new Counter("switchyard.header.stripped");
  // Counted where they happen (off the request path): direct host calls.
  snapshotUpdates: u32 = defineMetric(METRIC_COUNTER, "switchyard.snapshot.updates");
  decodeErrors: u32 = defineMetric(METRIC_COUNTER, "switchyard.snapshot.decode_errors");
  pollErrors: u32 = defineMetric(METRIC_COUNTER, "switchyard.agent.poll_errors");
  writerActive: u32 = defineMetric(METRIC_GAUGE, "switchyard.writer.active");
  /** decisions refused by this configuration (routeHeader not declared), each time the decisions change */
  rulesRefused: u32 = defineMetric(METRIC_COUNTER, "switchyard.rule.refused");
  ruleOverflow: Counter = new Counter("switchyard.rule.applied.overflow");
  private ruleCounters: Map<string, Counter> = new Map();
  private ruleCounterList: Array<Counter> = [];

  /** The request counter of one (set, rule): defined once, bounded by MAX_RULE_COUNTERS. */
  ruleCounter(set: string, ruleId: string): Counter {
    const key = set + "\u0000" + ruleId;
    if (this.ruleCounters.has(key)) return this.ruleCounters.get(key);
    if (this.ruleCounterList.length >= MAX_RULE_COUNTERS) return this.ruleOverflow;
    const c = new Counter("switchyard.rule.applied." + segment(set) + "." + segment(ruleId));
    this.ruleCounters.set(key, c);
    this.ruleCounterList.push(c);
    return c;
  }

  flush(): void {
    this.decisionNormal.flush();
    this.decisionDegraded.flush();
    this.failMode.flush();
    this.headerStripped.flush();
    this.ruleOverflow.flush();
    for (let i = 0; i < this.ruleCounterList.length; i++) unchecked(this.ruleCounterList[i]).flush();
  }
}
