// Root context: configuration, the snapshot feed and writer election.
//
// One VM per Envoy worker runs this plugin. Exactly one of them (the writer, elected through a
// CAS-protected lease in shared data) long-polls the agent with proxy_http_call and publishes each
// new snapshot into shared data; every VM (writer included) re-reads shared data on its tick and
// decodes a version only once. If the writer's VM goes away its lease expires and another VM
// takes over. The request path never waits on the network and never decodes.
import { RootContext, Context } from "@solo-io/proxy-runtime/assembly";
import {
  log, LOG_INFO, LOG_WARN, LOG_ERROR, nowMs, setTickPeriod, readPluginConfiguration, readBuffer,
  getSharedData, setSharedData, getHeader, serializePairs, httpCall, incrementMetric,
  OK, CAS_MISMATCH, MAP_HTTP_CALL_RESPONSE_HEADERS, BUFFER_HTTP_CALL_RESPONSE_BODY,
} from "../abi/host";
import { parseConfig, PluginConfig, MAX_CONFIG_BYTES } from "../lib/config";
import { decodeSnapshot, readStamp, stampOf, Snapshot, SnapshotStamp, MAX_SNAPSHOT_BYTES } from "../lib/snapshot";
import { isStale, orderSnapshot, MAX_CLOCK_SKEW_MS, ORDER_ADOPT, ORDER_SAME, ORDER_FUTURE, ORDER_OLDER } from "../lib/freshness";
import { resolveLink, LinkView } from "../lib/link";
import { claimLease, encodeLease, LEASE_BYTES } from "../lib/lease";
import { Metrics } from "./metrics";
import { LoadAware } from "./loadaware";
import { Rng } from "../lib/inflight";
import { SwitchyardStream } from "./stream";
import { RequestView } from "./view";
import { shareInband } from "./inband";
import { MeshReporter } from "./mesh-report";

const SNAPSHOT_KEY = String.UTF8.encode("switchyard.snapshot.v1");
const WRITER_KEY = String.UTF8.encode("switchyard.writer.v1");
const VMSEQ_KEY = String.UTF8.encode("switchyard.vmseq.v1");
const INFLIGHT_KEY = String.UTF8.encode("switchyard.inflight.v1");
const PENDING_KEY = String.UTF8.encode("switchyard.pending.v1");
const STATUS_KEY = String.UTF8.encode(":status");

export class SwitchyardRoot extends RootContext {
  config: PluginConfig | null = null;
  loadAware: LoadAware = new LoadAware();
  metrics: Metrics | null = null;
  /** Mesh-wide in-flight: the report to the agent and the other proxies' counts (plugin/mesh-report.ts). */
  mesh: MeshReporter | null = null;
  /** Everything a request needs; replaced on configuration, refreshed on snapshot changes. */
  requestView: RequestView | null = null;

  snapshot: Snapshot | null = null;
  snapshotSeq: u64 = 0;
  lastCas: u32 = 0;
  stale: bool = true;
  view: LinkView = new LinkView(0);

  vmToken: u32 = 0;
  isWriter: bool = false;
  leaseExpiryMs: u64 = 0;
  pollInFlight: bool = false;
  pollToken: u32 = 0;
  nextPollAtMs: u64 = 0;
  pollFailing: bool = false;
  decodeFailing: bool = false;

  createContext(context_id: u32): Context {
    return new SwitchyardStream(context_id, this, this.requestView);
  }

  onConfigure(configuration_size: u32): bool {
    if (configuration_size > <u32>MAX_CONFIG_BYTES) {
      log(LOG_ERROR, "switchyard: invalid plugin configuration: configuration: larger than " + MAX_CONFIG_BYTES.toString() + " bytes");
      return false;
    }
    const text = readPluginConfiguration(configuration_size);
    const parsed = parseConfig(text);
    if (parsed.config == null) {
      log(LOG_ERROR, "switchyard: invalid plugin configuration: " + parsed.error);
      return false;
    }
    const cfg = parsed.config!;
    this.config = cfg;
    if (this.metrics == null) this.metrics = new Metrics(); // defined once per VM; survives reconfiguration
    if (this.mesh == null) this.mesh = new MeshReporter();
    this.vmToken = this.allocateVmToken();
    this.loadAware.configure(cfg, this.vmToken ^ <u32>(nowMs() & 0xffffffff), this.vmToken);
    const view = new RequestView(cfg, this.loadAware, this.metrics!);
    view.nowMs = <f64>nowMs();
    view.rulesRng = new Rng((this.vmToken * 0x9e3779b1) ^ <u32>(nowMs() & 0xffffffff));
    this.requestView = view;
    this.recompute(cfg);
    setTickPeriod(<u32>cfg.refreshMs);
    log(LOG_INFO, "switchyard: configured: " + cfg.link.services.length.toString() + " link services, agent cluster " +
      cfg.agent.cluster + ", vm token " + this.vmToken.toString());
    return true;
  }

  /** A small unique number per VM, from a CAS-incremented counter in shared data. */
  private allocateVmToken(): u32 {
    for (let attempt = 0; attempt < 16; attempt++) {
      const cur = getSharedData(VMSEQ_KEY);
      let next: u32 = 1;
      if (cur.found && cur.value.byteLength >= 4) next = load<u32>(changetype<usize>(cur.value)) + 1;
      const buf = new ArrayBuffer(4);
      store<u32>(changetype<usize>(buf), next);
      // The ABI has no create-if-absent: a first write with cas 0 can race another VM's first
      // write. Mixing in the clock keeps tokens distinct in that case.
      const r = setSharedData(VMSEQ_KEY, buf, cur.found ? cur.cas : 0);
      if (r == OK) return cur.found ? next : (next | (<u32>(nowMs() & 0xffff) << 16));
      if (r != CAS_MISMATCH) break;
    }
    return <u32>(nowMs() & 0xffffffff) | 1;
  }

  onTick(): void {
    const cfg = this.config;
    if (cfg == null) return;
    const now = nowMs();
    this.requestView!.nowMs = <f64>now;
    this.refreshFromSharedData();
    this.updateStaleness(now, cfg);
    this.elect(now, cfg);
    if (this.isWriter && !this.pollInFlight && now >= this.nextPollAtMs) this.poll(cfg);
    if (cfg.loadAware.enabled) {
      const maxAge = cfg.sectionMaxAgeMs();
      const meshOn = cfg.loadAware.meshReportMs > 0;
      if (meshOn) this.mesh!.adopt(now, cfg, this.loadAware);
      this.shareInflight(now, maxAge);
      this.loadAware.xvm.tick(now, maxAge, this.loadAware.inflight, this.loadAware.inband);
      this.loadAware.inflight.record(<f64>now);
      if (meshOn && this.isWriter) this.mesh!.report(now, cfg, this.loadAware);
      shareInband(this.loadAware.inband, this.loadAware.inflight);
      this.sharePrefixes(now, maxAge);
      if (this.loadAware.requestAware) this.sharePending(now, maxAge);
    }
    this.metrics!.flush();
    this.loadAware.onTick(<f64>now);
  }

  /** Publishes this VM's in-flight counts and reads the other workers' (see lib/inflight.ts). */
  private shareInflight(now: u64, maxAge: u64): void {
    for (let attempt = 0; attempt < 3; attempt++) {
      const cur = getSharedData(INFLIGHT_KEY);
      const doc = this.loadAware.inflight.merge(cur.found ? cur.value : new ArrayBuffer(0), this.vmToken, now, maxAge);
      const r = setSharedData(INFLIGHT_KEY, doc, cur.found ? cur.cas : 0);
      if (r != CAS_MISMATCH) return;
    }
  }

  /** Publishes this VM's pending prefill per instance and reads the other workers' (lib/pending-prefill.ts). */
  private sharePending(now: u64, maxAge: u64): void {
    const la = this.loadAware;
    for (let attempt = 0; attempt < 3; attempt++) {
      const cur = getSharedData(PENDING_KEY);
      const doc = la.pending.merge(cur.found ? cur.value : new ArrayBuffer(0), this.vmToken, now, maxAge, la.inflight);
      const r = setSharedData(PENDING_KEY, doc, cur.found ? cur.cas : 0);
      if (r != CAS_MISMATCH) return;
    }
  }

  /** Exchanges the prefix index records and the adapter marks of every request-aware service with the other VMs (lib/request/prefix-share.ts, lib/choice/adapter-share.ts). */
  private sharePrefixes(now: u64, maxAge: u64): void {
    const plans = this.loadAware.plans;
    for (let i = 0; i < plans.length; i++) {
      const rq = plans[i].req;
      if (rq != null) {
        rq.sharePrefixes(this.vmToken, now, maxAge, this.loadAware.inflight);
        rq.shareAdapters(this.vmToken, now, maxAge, this.loadAware.inflight);
      }
    }
  }

  /** Derived state: link view, load-aware plans and the request view, after a snapshot or staleness change. */
  private recompute(cfg: PluginConfig): void {
    this.view = resolveLink(cfg.link, this.snapshot, this.stale);
    if (cfg.loadAware.enabled) this.loadAware.rebuild(cfg, this.snapshot, this.stale);
    this.requestView!.refresh(this.view);
    // Rule decisions apply only while the snapshot is fresh: stale or missing, every route
    // header is stripped and requests take the default route (the fail-safe, docs/rules.md).
    const snap = this.snapshot;
    this.requestView!.refreshRules(cfg, snap == null || this.stale ? null : snap.rules);
  }

  private updateStaleness(now: u64, cfg: PluginConfig): void {
    const snap = this.snapshot;
    const stale = snap == null || isStale(now, snap.generatedAtMs, cfg.link.stalenessMs, MAX_CLOCK_SKEW_MS);
    if (stale != this.stale) {
      this.stale = stale;
      this.recompute(cfg);
      if (stale && snap != null) log(LOG_WARN, "switchyard: snapshot seq " + snap.seq.toString() + " is stale; using fail mode");
    }
  }

  private elect(now: u64, cfg: PluginConfig): void {
    const cur = getSharedData(WRITER_KEY);
    const decision = claimLease(cur.found, cur.value, this.vmToken, now, <u64>cfg.leaseMs);
    if (decision.write) {
      const r = setSharedData(WRITER_KEY, encodeLease(this.vmToken, now + <u64>cfg.leaseMs), cur.found ? cur.cas : 0);
      decision.mine = r == OK;
      if (decision.mine) this.leaseExpiryMs = now + <u64>cfg.leaseMs;
    }
    if (decision.mine != this.isWriter) {
      this.isWriter = decision.mine;
      incrementMetric(this.metrics!.writerActive, decision.mine ? 1 : -1);
      log(LOG_INFO, "switchyard: vm " + this.vmToken.toString() + (decision.mine ? " is now the snapshot writer" : " is no longer the snapshot writer"));
    }
  }

  private poll(cfg: PluginConfig): void {
    const a = cfg.agent;
    let path = a.path + "?after=" + this.snapshotSeq.toString();
    if (a.longPollMs > 0) path += "&waitMs=" + a.longPollMs.toString();
    const headers = serializePairs([":method", ":path", ":authority", "accept"],
      ["GET", path, a.authority, "application/vnd.switchyard.snapshot.v1"]);
    const r = httpCall(a.cluster, headers, <u32>a.timeoutMs);
    if (r.status != OK) {
      this.pollFailed("proxy_http_call to cluster " + a.cluster + " refused (result " + r.status.toString() + ")", cfg);
      return;
    }
    this.pollInFlight = true;
    this.pollToken = r.token;
  }

  private pollFailed(why: string, cfg: PluginConfig): void {
    incrementMetric(this.metrics!.pollErrors, 1);
    if (!this.pollFailing) log(LOG_WARN, "switchyard: agent poll failed: " + why);
    this.pollFailing = true;
    this.nextPollAtMs = nowMs() + <u64>cfg.agent.pollMs;
  }

  onHttpCallResponse(token: u32, headers: u32, body_size: u32, trailers: u32): void {
    const cfg = this.config;
    if (cfg == null) return;
    if (this.mesh != null && this.mesh!.owns(token)) { this.mesh!.onAnswer(nowMs(), headers, body_size, this.loadAware, cfg!.loadAware.meshReportMs); return; }
    if (token != this.pollToken || !this.pollInFlight) return;
    this.pollInFlight = false;
    if (headers == 0) { this.pollFailed("no response (timeout, reset or connect failure)", cfg); return; }
    const status = getHeader(MAP_HTTP_CALL_RESPONSE_HEADERS, STATUS_KEY);
    if (status == null || String.UTF8.decode(status) != "200") {
      this.pollFailed("agent answered status " + (status == null ? "none" : String.UTF8.decode(status)), cfg);
      return;
    }
    if (body_size > <u32>MAX_SNAPSHOT_BYTES) { this.rejectSnapshot("answer of " + body_size.toString() + " bytes exceeds 1 MiB", cfg); return; }
    const body = readBuffer(BUFFER_HTTP_CALL_RESPONSE_BODY, body_size);
    if (body == null) { this.pollFailed("cannot read the answer body", cfg); return; }
    if (this.pollFailing) log(LOG_INFO, "switchyard: agent poll recovered");
    this.pollFailing = false;
    // Long polling: ask again at once; plain polling: wait pollMs.
    this.nextPollAtMs = cfg.agent.longPollMs > 0 ? 0 : nowMs() + <u64>cfg.agent.pollMs;
    const held = this.heldStamp();
    const peek = readStamp(body);
    if (held != null && peek != null && peek.sameVersion(held)) return; // nothing new
    const res = decodeSnapshot(body);
    if (res.snapshot == null) { this.rejectSnapshot(res.error, cfg); return; }
    const snap = res.snapshot!;
    const now = nowMs();
    const order = orderSnapshot(held, stampOf(snap), now, MAX_CLOCK_SKEW_MS);
    if (order == ORDER_FUTURE) {
      this.rejectSnapshot("dated " + (snap.generatedAtMs - now).toString() + " ms ahead of this proxy's clock (more than " + MAX_CLOCK_SKEW_MS.toString() + " ms)", cfg);
      return;
    }
    if (order == ORDER_OLDER) {
      // the agent went back in seq within one boot: refuse, and do not re-poll at once (the
      // long poll would answer immediately, again and again)
      this.rejectSnapshot("seq " + snap.seq.toString() + " is older than the held seq " + this.snapshotSeq.toString() + " of the same agent boot", cfg);
      return;
    }
    this.decodeFailing = false;
    this.adopt(snap, cfg);
    this.publish(body, snap);
    if (cfg.agent.longPollMs > 0) this.poll(cfg);
  }

  private rejectSnapshot(why: string, cfg: PluginConfig): void {
    // Keep the last good snapshot; count and report (once per failure streak).
    incrementMetric(this.metrics!.decodeErrors, 1);
    if (!this.decodeFailing) log(LOG_ERROR, "switchyard: rejected agent snapshot, keeping seq " + this.snapshotSeq.toString() + ": " + why);
    this.decodeFailing = true;
    this.nextPollAtMs = nowMs() + <u64>cfg.agent.pollMs;
  }

  private heldStamp(): SnapshotStamp | null {
    const snap = this.snapshot;
    return snap == null ? null : stampOf(snap);
  }

  private publish(body: ArrayBuffer, snap: Snapshot): void {
    const mine = stampOf(snap);
    for (let attempt = 0; attempt < 4; attempt++) {
      const cur = getSharedData(SNAPSHOT_KEY);
      const shared = cur.found ? readStamp(cur.value) : null;
      if (shared != null) {
        // CAS guard: never replace what another writer published if it is the same version or
        // newer in the same boot (lib/freshness.ts decides)
        const order = orderSnapshot(shared, mine, nowMs(), MAX_CLOCK_SKEW_MS);
        if (order == ORDER_SAME) { this.lastCas = cur.cas; return; }
        if (order != ORDER_ADOPT) return;
      }
      const r = setSharedData(SNAPSHOT_KEY, body, cur.found ? cur.cas : 0);
      if (r == OK) return;
      if (r != CAS_MISMATCH) { log(LOG_ERROR, "switchyard: cannot publish snapshot (result " + r.toString() + ")"); return; }
    }
  }

  /** Every VM: pick up a snapshot another VM published; decode each version once. */
  private refreshFromSharedData(): void {
    const cur = getSharedData(SNAPSHOT_KEY);
    if (!cur.found || cur.cas == this.lastCas) return;
    this.lastCas = cur.cas;
    const held = this.heldStamp();
    const peek = readStamp(cur.value);
    if (held != null && peek != null && peek.sameVersion(held)) return;
    const cfg = this.config!;
    const res = decodeSnapshot(cur.value);
    if (res.snapshot == null) {
      incrementMetric(this.metrics!.decodeErrors, 1);
      log(LOG_ERROR, "switchyard: shared snapshot rejected: " + res.error);
      return;
    }
    const snap = res.snapshot!;
    const order = orderSnapshot(held, stampOf(snap), nowMs(), MAX_CLOCK_SKEW_MS);
    if (order == ORDER_FUTURE) {
      incrementMetric(this.metrics!.decodeErrors, 1);
      log(LOG_ERROR, "switchyard: shared snapshot rejected: dated beyond the accepted clock skew");
      return;
    }
    if (order == ORDER_ADOPT) this.adopt(snap, cfg);
  }

  private adopt(snap: Snapshot, cfg: PluginConfig): void {
    this.snapshot = snap;
    this.snapshotSeq = snap.seq;
    this.stale = isStale(nowMs(), snap.generatedAtMs, cfg.link.stalenessMs, MAX_CLOCK_SKEW_MS);
    this.recompute(cfg);
    incrementMetric(this.metrics!.snapshotUpdates, 1);
  }
}
