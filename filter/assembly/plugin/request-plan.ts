// Per request-aware service (loadAware.services[].request): the body parser, the prefix index
// (per VM, exchanged with the other worker VMs on the tick: lib/request/prefix-share.ts), the
// LLM side of the plan rebuilt with each snapshot, the per-request scratch and the counters (to
// host metrics on tick).
import { RequestConfig } from "../lib/request/config";
import { RequestParser, ParseLimits } from "../lib/request/openai";
import { PrefixIndex, PrefixMatch, indexEntriesFor } from "../lib/request/prefix";
import { PrefixShare } from "../lib/request/prefix-share";
import { Inflight } from "../lib/inflight";
import { LlmPlan, buildLlmPlan } from "../lib/choice/plan-llm";
import { RequestCost, CostParams } from "../lib/choice/score-request";
import { AdapterSends } from "../lib/choice/adapter-sends";
import { AdapterShare } from "../lib/choice/adapter-share";
import { AdapterStreamsShare } from "../lib/choice/adapter-streams-share";
import { RequestPick } from "../lib/choose-request";
import { Plan } from "../lib/choice/plan";
import { InstanceLlm } from "../lib/snapshot-llm";
import { defineMetric, incrementMetric, recordMetric, METRIC_COUNTER, METRIC_GAUGE, getSharedData, setSharedData, OK, CAS_MISMATCH } from "../abi/host";

export const RC_PARSED: i32 = 0;
export const RC_INVALID: i32 = 1;
export const RC_REJECTED: i32 = 2;
export const RC_SHED_SHEDDABLE: i32 = 3;
export const RC_SHED_STANDARD: i32 = 4;
export const RC_HOLD_TIMEOUT: i32 = 5;
export const RC_PREFIX_HIT: i32 = 6;
export const RC_UNKNOWN_MODEL: i32 = 7;
/** blocks learnt from other worker VMs' records, and records lost on the way (ring overrun, a late tick) */
export const RC_PREFIX_LEARNED: i32 = 8;
export const RC_PREFIX_SHARE_LOST: i32 = 9;
/** 429s sent while the request's model pool was overloaded (the pool thresholds in force: lib/overload.ts); also in shed_<criticality> */
export const RC_SHED_OVERLOADED: i32 = 10;
/** the other worker VMs' adapter records (marks and streams) skipped: an address this VM has no slot for, or beyond the bounds */
export const RC_ADAPTER_RECORDS_SKIPPED: i32 = 11;
/** streams not recorded: 16 adapters already streaming from their instance (adapter-streams.ts) */
export const RC_ADAPTER_STREAMS_DROPPED: i32 = 12;
const RC_COUNT = 13;
const RC_NAMES: Array<string> = ["parsed", "invalid", "rejected", "shed_sheddable", "shed_standard", "hold_timeout", "prefix_hit", "unknown_model",
  "prefix_learned", "prefix_share_lost", "shed_overloaded", "adapter_records_skipped", "adapter_streams_dropped"];

export class RequestPlan {
  parser: RequestParser;
  index: PrefixIndex;
  hashes: StaticArray<u64>;
  match: PrefixMatch = new PrefixMatch();
  lp: LlmPlan = new LlmPlan();
  rc: RequestCost = new RequestCost();
  cp: CostParams = new CostParams();
  out: RequestPick = new RequestPick();
  /** Adapters sent to instances that had not loaded them, until a scrape shows it. */
  adapters: AdapterSends = new AdapterSends();
  /** The other worker VMs' adapter marks, exchanged under adapterKey on the tick. */
  adapterShare: AdapterShare = new AdapterShare();
  adapterKey: ArrayBuffer;
  /** The adapters streaming from each instance, exchanged with the other VMs under streamsKey (rc.streams holds them). */
  streamsShare: AdapterStreamsShare = new AdapterStreamsShare();
  streamsKey: ArrayBuffer;
  /** The plan's in-flight slots and its candidates' scrape times (for re-applying the marks on the tick). */
  private planSlots: StaticArray<i32> = new StaticArray<i32>(0);
  private scrapeAtMs: Array<f64> = [];
  /** Address each in-flight slot had in the last plan: a slot reused by another address forgets its prefixes. */
  private slotAddr: Map<i32, string> = new Map();
  counts: StaticArray<i64> = new StaticArray<i64>(RC_COUNT);
  /** The index's exchange with the other worker VMs, under shareKey. */
  share: PrefixShare;
  shareKey: ArrayBuffer;
  private learnedSeen: u64 = 0;
  private lostSeen: u64 = 0;
  private skippedSeen: u64 = 0;
  private droppedSeen: u64 = 0;
  /** request.criticalityHeader, encoded once. */
  critHeader: ArrayBuffer;
  /** request.objectiveHeader, encoded once. */
  objectiveHeader: ArrayBuffer;
  private metricIds: StaticArray<u32> = new StaticArray<u32>(RC_COUNT);
  /** gauge: the prefix index's entries now (sizeIndex) */
  private entriesMetric: u32;

  constructor(public cfg: RequestConfig, service: string) {
    const lim = new ParseLimits();
    lim.maxBodyBytes = cfg.maxBodyBytes;
    this.parser = new RequestParser(lim);
    this.critHeader = String.UTF8.encode(cfg.criticalityHeader);
    this.objectiveHeader = String.UTF8.encode(cfg.objectiveHeader);
    this.index = new PrefixIndex(cfg.prefixEntries, <u64>cfg.prefixMaxAgeMs);
    this.hashes = new StaticArray<u64>(cfg.prefixMaxBlocks);
    this.share = new PrefixShare(cfg.prefixEntries);
    this.shareKey = String.UTF8.encode("switchyard.prefix.v1." + service);
    this.adapterKey = String.UTF8.encode("switchyard.adapters.v1." + service);
    this.streamsKey = String.UTF8.encode("switchyard.adapter-streams.v1." + service);
    this.index.ring = this.share.ring;
    this.cp.bytesPerToken = cfg.bytesPerToken;
    this.cp.blockBytes = cfg.prefixBlockBytes;
    this.cp.fallbackPrefillMs = cfg.fallbackPrefillMsPerToken;
    this.cp.adapterLoadMs = cfg.adapterLoadMs;
    this.cp.kvFull = cfg.kvCacheFull;
    this.cp.decodeIdleShare = cfg.decodeIdleShare;
    this.cp.shed.set(cfg.shedSheddableAt, cfg.shedStandardAt, cfg.shedKvSheddableAt, cfg.shedKvStandardAt, cfg.shedPoolSheddableAt, cfg.shedPoolStandardAt, cfg.shedOverloadShare);
    for (let i = 0; i < RC_COUNT; i++) this.metricIds[i] = defineMetric(METRIC_COUNTER, "switchyard.request." + RC_NAMES[i] + "." + service);
    this.entriesMetric = defineMetric(METRIC_GAUGE, "switchyard.request.prefix_entries." + service);
    recordMetric(this.entriesMetric, <u64>this.index.capacity());
  }

  @inline count(what: i32): void { unchecked(this.counts[what]++); }

  /** After a plan rebuild: the LLM side in plan order (with the adapters sent since its scrapes), and prefixes of re-assigned slots dropped. */
  rebuild(plan: Plan, service: string, llm: Array<InstanceLlm>, esMs: Array<f64>, weight: Array<f64>, scrapeAtMs: Array<f64>, nowMs: f64): void {
    this.lp = buildLlmPlan(plan, service, llm, esMs, weight);
    this.planSlots = plan.slot;
    this.scrapeAtMs = scrapeAtMs;
    this.adapters.reapply(this.lp, plan.slot, scrapeAtMs, nowMs);
    this.adapterShare.apply(this.lp, plan.slot);
    if (this.rc.cachedBlocks.length < plan.n) this.rc.cachedBlocks = new StaticArray<i32>(plan.n);
    for (let i = 0; i < plan.n; i++) {
      const s = plan.slot[i];
      const a = plan.addr[i];
      if (this.slotAddr.has(s) && this.slotAddr.get(s) != a) { this.index.forgetSlot(<u16>s); this.rc.streams.forgetSlot(s); }
      this.slotAddr.set(s, a);
    }
    this.sizeIndex(plan, service, llm);
  }

  /**
   * The prefix index follows the KV capacity of the live instances (prefix.ts indexEntriesFor),
   * re-sized here, on snapshot adoption, bounded by prefix.maxEntries. No plan (no snapshot): the
   * size is left as it is, so a gap in the snapshots does not churn the index.
   */
  private sizeIndex(plan: Plan, service: string, llm: Array<InstanceLlm>): void {
    if (plan.n == 0) return;
    const kv = new Array<f64>(plan.n);
    for (let i = 0; i < plan.n; i++) {
      let t: f64 = NaN;
      const a = plan.addr[i];
      for (let j = 0; j < llm.length; j++) if (llm[j].addr == a && llm[j].service == service) { t = <f64>llm[j].kvTokens; break; }
      kv[i] = t;
    }
    const cfg = this.cfg;
    if (this.index.resize(indexEntriesFor(kv, <f64>cfg.prefixBlockBytes / cfg.bytesPerToken, cfg.prefixEntries, cfg.prefixMaxEntries))) recordMetric(this.entriesMetric, <u64>this.index.capacity());
  }

  /**
   * On the tick: this VM's new prefix records out, the other VMs' in (one shared-data read and
   * CAS write per service; retried on a concurrent write).
   */
  sharePrefixes(token: u32, nowMs: u64, maxAgeMs: u64, inflight: Inflight): void {
    for (let attempt = 0; attempt < 3; attempt++) {
      const cur = getSharedData(this.shareKey);
      const doc = this.share.merge(cur.found ? cur.value : new ArrayBuffer(0), token, nowMs, maxAgeMs, this.index, inflight);
      const r = setSharedData(this.shareKey, doc, cur.found ? cur.cas : 0);
      if (r == OK) { this.share.ring.published(); break; }
      if (r != CAS_MISMATCH) break;
    }
    // lost = records of the other VMs this VM never got (each overrun counted once per reader)
    const sh = this.share;
    const lost = sh.missed;
    unchecked(this.counts[RC_PREFIX_LEARNED] += <i64>(sh.learned - this.learnedSeen));
    unchecked(this.counts[RC_PREFIX_SHARE_LOST] += <i64>(lost - this.lostSeen));
    this.learnedSeen = sh.learned;
    this.lostSeen = lost;
  }

  /**
   * On the tick: this VM's adapter marks out, the other VMs' in (adapter-share.ts); the plan's
   * marks are then this VM's still in force plus the others'. Likewise the adapters streaming from
   * each instance (adapter-streams-share.ts).
   */
  shareAdapters(token: u32, nowMs: u64, maxAgeMs: u64, inflight: Inflight): void {
    for (let attempt = 0; attempt < 3; attempt++) {
      const cur = getSharedData(this.adapterKey);
      const doc = this.adapterShare.merge(cur.found ? cur.value : new ArrayBuffer(0), this.adapters, token, nowMs, maxAgeMs, inflight);
      const r = setSharedData(this.adapterKey, doc, cur.found ? cur.cas : 0);
      if (r != CAS_MISMATCH) break;
    }
    for (let attempt = 0; attempt < 3; attempt++) {
      const cur = getSharedData(this.streamsKey);
      const doc = this.streamsShare.merge(cur.found ? cur.value : new ArrayBuffer(0), this.rc.streams, token, nowMs, maxAgeMs, inflight);
      if (setSharedData(this.streamsKey, doc, cur.found ? cur.cas : 0) != CAS_MISMATCH) break;
    }
    const skipped = this.adapterShare.skipped + this.streamsShare.skipped, dropped = this.rc.streams.dropped;
    unchecked(this.counts[RC_ADAPTER_RECORDS_SKIPPED] += <i64>(skipped - this.skippedSeen));
    unchecked(this.counts[RC_ADAPTER_STREAMS_DROPPED] += <i64>(dropped - this.droppedSeen));
    this.skippedSeen = skipped;
    this.droppedSeen = dropped;
    if (this.lp.n == 0) return;
    this.lp.resetMarks();
    this.adapters.reapply(this.lp, this.planSlots, this.scrapeAtMs, <f64>nowMs);
    this.adapterShare.apply(this.lp, this.planSlots);
  }

  flush(): void {
    for (let i = 0; i < RC_COUNT; i++) {
      const n = this.counts[i];
      if (n != 0) { incrementMetric(this.metricIds[i], n); this.counts[i] = 0; }
    }
  }
}
