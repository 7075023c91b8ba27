// Glue for in-band learning (lib/inband.ts, lib/orca.ts, docs/inband.md): what a stream records
// about the instance it was sent to, the ORCA header on its answer, the counters, and the
// table's exchange between worker VMs on the tick. Decisions live in the pure modules.
import { InbandConfig } from "../lib/config";
import { InbandParams, InbandTable } from "../lib/inband";
import { OrcaReport, parseOrcaHeader, parseOrcaBinary } from "../lib/orca";
import {
  defineMetric, incrementMetric, METRIC_COUNTER, getHeader, removeHeader, peekHeader, Peek, MAP_RESPONSE_HEADERS, nowNanos,
  getSharedData, setSharedData, CAS_MISMATCH,
} from "../abi/host";
import { Inflight } from "../lib/inflight";

const STATUS = String.UTF8.encode(":status");
/** :status is only looked at: read into the scratch area (abi/host.ts peekHeader), no allocation. */
const STATUS_PEEK = new Peek();
const ORCA_HEADER = String.UTF8.encode("endpoint-load-metrics");
const ORCA_BIN_HEADER = String.UTF8.encode("endpoint-load-metrics-bin");
const INBAND_KEY = String.UTF8.encode("switchyard.inband.v2"); // v2: 16 f64 per entry (v1: 12), lib/inband.ts merge()
/** One report object per VM: the response path allocates no report. */
const REPORT = new OrcaReport();

export function inbandParams(c: InbandConfig): InbandParams {
  const p = new InbandParams();
  p.tauMs = <f64>c.tauMs;
  p.refTauMs = <f64>c.refTauMs;
  p.slowdownThreshold = c.slowdownThreshold;
  p.errorTauMs = <f64>c.errorTauMs;
  p.errorWeight = c.errorWeight;
  return p;
}

/** The request path's clock: one proxy_get_current_time_nanoseconds (the tick's clock is refreshMs coarse). */
@inline export function clockMs(): f64 { return <f64>nowNanos() / 1e6; }

export class InbandCounters {
  probes: i64 = 0;
  probeMetric: u32 = defineMetric(METRIC_COUNTER, "switchyard.inband.probes");
  orcaMetric: u32 = defineMetric(METRIC_COUNTER, "switchyard.inband.orca_reports");
  orcaInvalidMetric: u32 = defineMetric(METRIC_COUNTER, "switchyard.inband.orca_invalid");
  errorMetric: u32 = defineMetric(METRIC_COUNTER, "switchyard.inband.errors");

  flush(t: InbandTable): void {
    if (this.probes != 0) { incrementMetric(this.probeMetric, this.probes); this.probes = 0; }
    if (t.orcaValid != 0) { incrementMetric(this.orcaMetric, t.orcaValid); t.orcaValid = 0; }
    if (t.orcaInvalid != 0) { incrementMetric(this.orcaInvalidMetric, t.orcaInvalid); t.orcaInvalid = 0; }
    if (t.errors != 0) { incrementMetric(this.errorMetric, t.errors); t.errors = 0; }
  }
}

/** The numeric :status of the response headers (0 if absent or not 3 digits). */
export function responseStatus(): i32 {
  const v = STATUS_PEEK;
  if (!peekHeader(MAP_RESPONSE_HEADERS, STATUS, v)) return 0;
  v.buf = null;
  if (v.len != 3) return 0;
  const p = v.ptr;
  let s = 0;
  for (let i = 0; i < 3; i++) {
    const c = <i32>load<u8>(p + <usize>i) - 0x30;
    if (c < 0 || c > 9) return 0;
    s = s * 10 + c;
  }
  return s;
}

/**
 * Response headers of a request sent to `slot` at `startMs` when we had `sentWith` requests in
 * flight to it (before this one): the time to headers and the status into the table, the ORCA
 * report (if any and enabled) into the slot's state; the ORCA headers
 * are removed unless cfg.stripOrca is false. Returns the status.
 */
export function recordHeaders(t: InbandTable, inflight: Inflight, slot: i32, startMs: f64, sentWith: i32, now: f64, cfg: InbandConfig): i32 {
  const status = responseStatus();
  t.headers(slot, startMs, now, status, sentWith);
  if (!cfg.orca) {
    if (cfg.stripOrca) stripOrcaHeaders();
    return status;
  }
  // two lookups per answer; a header is removed only when present (host calls cost more than the parse)
  const h = getHeader(MAP_RESPONSE_HEADERS, ORCA_HEADER);
  const b = getHeader(MAP_RESPONSE_HEADERS, ORCA_BIN_HEADER);
  if (h != null) t.orca(slot, parseOrcaHeader(String.UTF8.decode(h), cfg.orcaQueueMetric, cfg.orcaKvCacheMetric, REPORT), now, unchecked(inflight.total[slot]));
  else if (b != null) t.orca(slot, parseOrcaBinary(String.UTF8.decode(b), cfg.orcaQueueMetric, cfg.orcaKvCacheMetric, REPORT), now, unchecked(inflight.total[slot]));
  if (cfg.stripOrca) {
    if (h != null) removeHeader(MAP_RESPONSE_HEADERS, ORCA_HEADER);
    if (b != null) removeHeader(MAP_RESPONSE_HEADERS, ORCA_BIN_HEADER);
  }
  return status;
}

/** The ORCA headers are the filter's input, not the client's (unless inband.stripOrca is false). */
export function stripOrcaHeaders(): void {
  removeHeader(MAP_RESPONSE_HEADERS, ORCA_HEADER);
  removeHeader(MAP_RESPONSE_HEADERS, ORCA_BIN_HEADER);
}

/** Tick: merges the other VMs' in-band state and publishes ours (InbandTable.merge). */
export function shareInband(t: InbandTable, inflight: Inflight): void {
  const slotOf = (a: string): i32 => sharedInflight.slotOf(a);
  sharedInflight = inflight;
  for (let attempt = 0; attempt < 3; attempt++) {
    const cur = getSharedData(INBAND_KEY);
    const doc = t.merge(cur.found ? cur.value : new ArrayBuffer(0), inflight.addresses(), slotOf, inflight.liveList());
    const r = setSharedData(INBAND_KEY, doc, cur.found ? cur.cas : 0);
    if (r != CAS_MISMATCH) return;
  }
}
// AssemblyScript closures cannot capture locals: the table to look addresses up in.
let sharedInflight: Inflight = new Inflight();
