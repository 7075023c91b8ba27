// Filter metrics. Envoy stores Wasm-defined metrics under the `wasmcustom.` namespace and its
// /stats/prometheus strips that namespace: Prometheus sees `switchyard_link_decision_normal` etc.
// (no `envoy_` prefix, no `_total`). Counters are shared by all VMs of the plugin.
import { defineMetric, METRIC_COUNTER, METRIC_GAUGE } from "../abi/host";

export class Metrics {
  decisionNormal: u32 = 0;
  decisionDegraded: u32 = 0;
  failMode: u32 = 0;
  snapshotUpdates: u32 = 0;
  decodeErrors: u32 = 0;
  pollErrors: u32 = 0;
  headerStripped: u32 = 0;
  writerActive: u32 = 0;

  define(): void {
    this.decisionNormal = defineMetric(METRIC_COUNTER, "switchyard.link.decision.normal");
    this.decisionDegraded = defineMetric(METRIC_COUNTER, "switchyard.link.decision.degraded");
    this.failMode = defineMetric(METRIC_COUNTER, "switchyard.link.failmode");
    this.snapshotUpdates = defineMetric(METRIC_COUNTER, "switchyard.snapshot.updates");
    this.decodeErrors = defineMetric(METRIC_COUNTER, "switchyard.snapshot.decode_errors");
    this.pollErrors = defineMetric(METRIC_COUNTER, "switchyard.agent.poll_errors");
    this.headerStripped = defineMetric(METRIC_COUNTER, "switchyard.header.stripped");
    this.writerActive = defineMetric(METRIC_GAUGE, "switchyard.writer.active");
  }
}
