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

  flush(): void {
    this.decisionNormal.flush();
    this.decisionDegraded.flush();
    this.failMode.flush();
    this.headerStripped.flush();
  }
}
