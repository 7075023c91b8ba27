// Mesh-wide in-flight, the host side (lib/mesh-inflight.ts holds the format and the decisions).
//
// The snapshot writer VM POSTs this proxy's in-flight counts to agent.inflightPath every
// loadAware.meshReportMs (one call in flight at a time, never on the request path) and shares the
// agent's answer -- the other proxies' counts -- with the proxy's other VMs through shared data;
// every VM adopts the newest answer on its tick and forgets it once it is older than
// meshExpiryMs (then prices as without mesh in-flight). A failed call or a refused answer changes
// nothing: the last good answer stands until it expires.
//
// Prefix placements (lib/mesh-prefix.ts): with a request-aware service the report is version 2 and
// carries each service's mesh outbox (at most its ring's capacity, 4,096, per report); every
// VM applies the answer's records of the other proxies to its own index when it adopts the answer.
// An agent that refuses version 2 (400: an agent older than this filter) is sent version 1 for
// NOT_SERVED_RETRY_MS, then version 2 again.
import {
  log, LOG_INFO, LOG_WARN, getSharedData, setSharedData, getHeader, serializePairs, httpCall, readBuffer,
  defineMetric, incrementMetric, METRIC_COUNTER, OK, CAS_MISMATCH, MAP_HTTP_CALL_RESPONSE_HEADERS, BUFFER_HTTP_CALL_RESPONSE_BODY,
} from "../abi/host";
import { PluginConfig } from "../lib/config";
import { LoadAware } from "./loadaware";
import { MeshOutbox, encodePrefixTrailer, applyPrefixTrailer } from "../lib/mesh-prefix";
import { PrefixIndex } from "../lib/request/prefix";
import { encodeReport, checkAnswer, applyAnswer, answerAgeMs, smoothAgeMs, MESH_AGE_UNKNOWN, wrapReceived, receivedAt, unwrapAnswer, meshExpiryMs, MAX_MESH_ANSWER_BYTES } from "../lib/mesh-inflight";

const MESH_KEY = String.UTF8.encode("switchyard.mesh.v1");
const STATUS_KEY = String.UTF8.encode(":status");
const CONTENT_TYPE = "application/vnd.switchyard.inflight.v1";
/** An agent without the endpoint (404) is asked again only this often (ms). */
const NOT_SERVED_RETRY_MS: u64 = 10000;

export class MeshReporter {
  inFlight: bool = false;
  token: u32 = 0;
  nextAtMs: u64 = 0;
  /** The id the agent gave this proxy (0: none yet); every VM learns it from the shared answer. */
  proxyId: u32 = 0;
  private lastCas: u32 = 0;
  /** Receive time of the answer in force (0: none). */
  private heldAtMs: u64 = 0;
  private known: bool = false;
  /** The running age of the answers' counts (ms; -1: none yet; lib/mesh-inflight.ts smoothAgeMs). */
  private ageMs: f64 = -1;
  private failing: bool = false;
  reports: u32 = defineMetric(METRIC_COUNTER, "switchyard.mesh.reports");
  errors: u32 = defineMetric(METRIC_COUNTER, "switchyard.mesh.report_errors");
  expired: u32 = defineMetric(METRIC_COUNTER, "switchyard.mesh.expired");
  /** prefix placements: records reported, records of other proxies applied / already known / ignored */
  prefixSent: u32 = defineMetric(METRIC_COUNTER, "switchyard.mesh.prefix_sent");
  prefixLearned: u32 = defineMetric(METRIC_COUNTER, "switchyard.mesh.prefix_learned");
  prefixKnown: u32 = defineMetric(METRIC_COUNTER, "switchyard.mesh.prefix_known");
  prefixIgnored: u32 = defineMetric(METRIC_COUNTER, "switchyard.mesh.prefix_ignored");
  /** records the outbox overwrote before a report took them (more new placements than it holds between reports) */
  prefixDropped: u32 = defineMetric(METRIC_COUNTER, "switchyard.mesh.prefix_dropped");
  /** version 1 reports until then (an agent refused version 2) */
  private v1UntilMs: u64 = 0;
  private sentV2: bool = false;

  /** Every VM, every tick (before the workers' counts are merged): the newest answer in, an expired one out. */
  adopt(now: u64, cfg: PluginConfig, la: LoadAware): void {
    const inflight = la.inflight;
    const cur = getSharedData(MESH_KEY);
    if (cur.found && cur.cas != this.lastCas) {
      this.lastCas = cur.cas;
      const at = receivedAt(cur.value);
      if (at > this.heldAtMs) this.take(unwrapAnswer(cur.value), at, la, cfg.loadAware.meshReportMs);
    }
    if (this.known && <f64>(now - this.heldAtMs) > meshExpiryMs(cfg.loadAware.meshReportMs)) {
      inflight.forgetMesh();
      this.known = false;
      incrementMetric(this.expired, 1);
    }
  }

  private take(answer: ArrayBuffer, at: u64, la: LoadAware, reportMs: i32): bool {
    const inflight = la.inflight;
    const c = checkAnswer(answer);
    if (!c.ok) return false;
    this.heldAtMs = at;
    // the other proxies' placements stand whatever the counts' state (they are hints, dated now)
    if (c.prefixAt >= 0) {
      const t = prefixTargets(la);
      const r = applyPrefixTrailer(answer, c.prefixAt, t.names, t.indexes, inflight, at);
      if (r.learned > 0) incrementMetric(this.prefixLearned, <u64>r.learned);
      if (r.known > 0) incrementMetric(this.prefixKnown, <u64>r.known);
      if (r.ignored > 0) incrementMetric(this.prefixIgnored, <u64>r.ignored);
    }
    this.proxyId = c.proxyId;
    if (c.ageMs == MESH_AGE_UNKNOWN) {
      // the agent does not know the rest of the mesh: unknown now, not when this answer expires
      if (this.known) inflight.forgetMesh();
      this.known = false;
      return true;
    }
    applyAnswer(answer, c, inflight);
    // dated by the running age of the answers, never before the counts in force (monotone dates)
    this.ageMs = smoothAgeMs(this.ageMs, answerAgeMs(c.ageMs, reportMs));
    const info = <f64>at - this.ageMs;
    if (info > inflight.meshInfoMs) inflight.meshInfoMs = info;
    this.known = true;
    return true;
  }

  /** The writer's tick (after the merge, so the counts are the whole proxy's): a report when due. */
  report(now: u64, cfg: PluginConfig, la: LoadAware): void {
    if (this.inFlight || now < this.nextAtMs) return;
    const inflight = la.inflight;
    const a = cfg.agent;
    const t = prefixTargets(la);
    let trailer: ArrayBuffer | null = null;
    if (t.names.length > 0 && now >= this.v1UntilMs) {
      const dropped = t.dropped();
      trailer = encodePrefixTrailer(t.names, t.outs, t.maxRecords, inflight);
      incrementMetric(this.prefixSent, <u64>t.pending());
      if (t.dropped() > dropped) incrementMetric(this.prefixDropped, t.dropped() - dropped);
    }
    this.sentV2 = trailer != null;
    const body = encodeReport(inflight, this.proxyId, cfg.loadAware.meshReportMs, now, trailer);
    const headers = serializePairs([":method", ":path", ":authority", "content-type"], ["POST", a.inflightPath, a.authority, CONTENT_TYPE]);
    // a fixed cadence (the tick quantizes each report, not the interval: 50 ms on 20 ms ticks is
    // 40/60 ms apart, 50 on average), restarted after a pause longer than the interval
    const every = <u64>cfg.loadAware.meshReportMs;
    this.nextAtMs = (this.nextAtMs > 0 && now - this.nextAtMs < every ? this.nextAtMs : now) + every;
    const r = httpCall(a.cluster, headers, <u32>meshExpiryMs(cfg.loadAware.meshReportMs), body);
    if (r.status != OK) { this.failed("proxy_http_call to cluster " + a.cluster + " refused (result " + r.status.toString() + ")"); return; }
    this.inFlight = true;
    this.token = r.token;
    incrementMetric(this.reports, 1);
  }

  owns(token: u32): bool { return this.inFlight && token == this.token; }

  /** The agent's answer to our report (root.onHttpCallResponse hands it over when owns(token)). */
  onAnswer(now: u64, headers: u32, bodySize: u32, la: LoadAware, reportMs: i32): void {
    this.inFlight = false;
    if (headers == 0) { this.failed("no answer (timeout, reset or connect failure)"); return; }
    const status = getHeader(MAP_HTTP_CALL_RESPONSE_HEADERS, STATUS_KEY);
    const code = status == null ? "none" : String.UTF8.decode(status!);
    if (code != "200") {
      if (code == "404") this.nextAtMs = now + NOT_SERVED_RETRY_MS; // an agent without mesh in-flight
      if (code == "400" && this.sentV2) { this.v1UntilMs = now + NOT_SERVED_RETRY_MS; this.nextAtMs = now; } // an agent without prefix placements
      this.failed("agent answered status " + code);
      return;
    }
    if (bodySize > <u32>MAX_MESH_ANSWER_BYTES) { this.failed("answer of " + bodySize.toString() + " bytes is too large"); return; }
    const body = bodySize == 0 ? new ArrayBuffer(0) : readBuffer(BUFFER_HTTP_CALL_RESPONSE_BODY, bodySize);
    if (body == null) { this.failed("cannot read the answer body"); return; }
    const c = checkAnswer(body!);
    if (!c.ok) { this.failed("answer refused: " + c.error); return; }
    if (this.failing) log(LOG_INFO, "switchyard: mesh in-flight report recovered");
    this.failing = false;
    // adopt at once here, and hand it to the other VMs (they adopt it on their tick)
    this.take(body!, now, la, reportMs);
    const wrapped = wrapReceived(body!, now);
    for (let attempt = 0; attempt < 3; attempt++) {
      const cur = getSharedData(MESH_KEY);
      if (cur.found && receivedAt(cur.value) >= now) return;
      const r = setSharedData(MESH_KEY, wrapped, cur.found ? cur.cas : 0);
      if (r != CAS_MISMATCH) return;
    }
  }

  private failed(why: string): void {
    incrementMetric(this.errors, 1);
    if (!this.failing) log(LOG_WARN, "switchyard: mesh in-flight report failed (the other proxies' counts expire; own counts still price): " + why);
    this.failing = true;
  }
}

/** The request-aware services' names, indexes, outboxes and per-report bounds (lib/mesh-prefix.ts). */
class PrefixTargets {
  names: Array<string> = [];
  indexes: Array<PrefixIndex | null> = [];
  outs: Array<MeshOutbox | null> = [];
  maxRecords: Array<i32> = [];
  /** records the last encode took: the outboxes' `sent` advanced by it */
  before: Array<u64> = [];
  pending(): u64 {
    let n: u64 = 0;
    for (let i = 0; i < this.outs.length; i++) if (this.outs[i] != null) n += this.outs[i]!.sent - this.before[i];
    return n;
  }
  dropped(): u64 {
    let n: u64 = 0;
    for (let i = 0; i < this.outs.length; i++) if (this.outs[i] != null) n += this.outs[i]!.dropped;
    return n;
  }
}

function prefixTargets(la: LoadAware): PrefixTargets {
  const t = new PrefixTargets();
  for (let i = 0; i < la.plans.length; i++) {
    const rq = la.plans[i].req;
    if (rq == null) continue;
    t.names.push(la.plans[i].cfg.service);
    t.indexes.push(rq.index);
    t.outs.push(rq.meshOut);
    // per report: what the outbox holds (min(prefix.entries, 4096)); a busier proxy's overflow is counted (prefix_dropped)
    t.maxRecords.push(rq.meshOut.ring.capacity());
    t.before.push(rq.meshOut.sent);
  }
  return t;
}
