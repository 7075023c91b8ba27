// The "switchyard" policy slot, in TypeScript:
//
// 1. SwitchyardBodyBlind — a model of the filter's current choice (no body): expected time in
//    system E[S] + backlog·E[S]/c, p2c over the model's instances; E[S] = windowed mean of
//    vllm:request_inference_time_seconds (the agent's service-time source for vLLM), c = the largest
//    running count seen (the agent's inferred slots), backlog = waiting + running at the scrape +
//    this proxy's requests sent since the scrape − those completed since (n_now − n_snap).
//
// 2. RequestAwarePrototype — the request-aware cost the filter will get; the cost model is written
//    down in bench/llm-routing/README.md ("Prototype cost model") and this code follows it term by
//    term so the AssemblyScript port is mechanical.
import { mulberry32, type Rng } from '../../sim/inference/prng';
import type { Criticality, PolicyCtx, RouteRequest, RoutingPolicy } from './fleet';
import { GIE_BLOCK_BYTES, GIE_MAX_BLOCKS, hashPromptBlocks, SlotIndex } from './prefix';
import type { Scraped } from './scrape';

/** Per-instance estimates from successive scrapes: counter deltas over a sliding window that
 *  reaches back far enough to hold `minCount` completions (the agent's minMomentCompletions). */
export class WindowEstimator {
  private hist: Array<{ t: number; m: Scraped }> = [];
  last?: Scraped;
  maxRunning = 1;
  constructor(
    readonly windowMs = 10_000,
    readonly minCount = 50,
    readonly keepMs = 120_000,
  ) {}
  add(t: number, m: Scraped): void {
    this.hist.push({ t, m });
    this.last = m;
    this.maxRunning = Math.max(this.maxRunning, m.numRequestsRunning);
    while (this.hist.length > 2 && t - this.hist[1].t > this.keepMs) this.hist.shift();
  }
  /** the oldest scrape to difference against */
  private base(count: (m: Scraped) => number): Scraped | undefined {
    if (!this.last || this.hist.length < 2) return undefined;
    const now = this.hist[this.hist.length - 1].t;
    for (let k = this.hist.length - 2; k >= 0; k--) {
      const h = this.hist[k];
      if (now - h.t >= this.windowMs && count(this.last) - count(h.m) >= this.minCount) return h.m;
    }
    return this.hist[0].m;
  }
  /** mean (ms) of a histogram over the window, undefined without completions */
  meanMs(sum: (m: Scraped) => number, count: (m: Scraped) => number): number | undefined {
    const b = this.base(count);
    if (!b || !this.last) return undefined;
    const n = count(this.last) - count(b);
    return n > 0 ? ((sum(this.last) - sum(b)) * 1000) / n : undefined;
  }
  /** prefill ms per computed prompt token: (Σ(TTFT − queue) − n_first·TPOT) / Σ prompt tokens */
  prefillMsPerToken(tpotMs: number): number | undefined {
    const b = this.base((m) => m.ttftCount);
    const l = this.last;
    if (!b || !l) return undefined;
    // prompt_tokens_total counts cached tokens too (as vLLM): keep the computed share
    const q = l.prefixCacheQueriesTotal - b.prefixCacheQueriesTotal;
    const computed = q > 0 ? 1 - Math.min(1, (l.prefixCacheHitsTotal - b.prefixCacheHitsTotal) / q) : 1;
    const tok = (l.promptTokensTotal - b.promptTokensTotal) * computed;
    const nFirst = l.ttftCount - b.ttftCount;
    const nQ = l.queueTimeCount - b.queueTimeCount;
    if (tok <= 0 || nFirst <= 0 || nQ <= 0) return undefined;
    // mean (TTFT − queue) per request, times requests with a first token, minus one step each
    const ttftMean = ((l.ttftSum - b.ttftSum) * 1000) / nFirst;
    const queueMean = ((l.queueTimeSum - b.queueTimeSum) * 1000) / nQ;
    const prefillMs = Math.max(0, ttftMean - queueMean - tpotMs) * nFirst;
    return prefillMs / tok;
  }
}

export class SwitchyardBodyBlind implements RoutingPolicy {
  readonly name: string;
  private ctx!: PolicyCtx;
  private rng!: Rng;
  private est: WindowEstimator[] = [];
  private inflight: number[] = [];
  private nSnap: number[] = [];
  constructor(
    readonly scrapeMs = 1000,
    readonly priorEsMs = 1000,
  ) {
    this.name = `switchyard-blind (${scrapeMs} ms)`;
  }
  init(ctx: PolicyCtx): void {
    this.ctx = ctx;
    this.rng = mulberry32(ctx.seed ^ 0x5b1d);
    const n = ctx.instances.length;
    this.est = Array.from({ length: n }, () => new WindowEstimator());
    this.inflight = new Array(n).fill(0);
    this.nSnap = new Array(n).fill(0);
  }
  onScrape(t: number, i: number, m: Scraped): void {
    this.est[i].add(t, m);
    this.nSnap[i] = this.inflight[i];
  }
  cost(i: number): number {
    const e = this.est[i];
    const es = e.meanMs((m) => m.inferenceTimeSum, (m) => m.inferenceTimeCount) ?? this.priorEsMs;
    const q = e.last ? e.last.numRequestsWaiting + e.last.numRequestsRunning : 0;
    const backlog = Math.max(0, q + this.inflight[i] - this.nSnap[i]);
    return es + (backlog * es) / Math.max(1, e.maxRunning);
  }
  route(_t: number, r: RouteRequest): number {
    const c = this.ctx.candidates(r.model);
    const a = c[Math.floor(this.rng() * c.length)];
    const b = c[Math.floor(this.rng() * c.length)];
    const pick = this.cost(b) < this.cost(a) ? b : a;
    this.inflight[pick]++;
    return pick;
  }
  onComplete(_t: number, i: number): void {
    this.inflight[i]--;
  }
}

/** Tunables of the prototype (README "Prototype cost model" gives their meaning and defaults). */
export interface PrototypeConfig {
  scrapeMs: number;
  bytesPerToken: number;
  blockBytes: number;
  maxBlocks: number;
  /** tokens per hashed block = blockBytes / bytesPerToken */
  indexCapacity: number;
  indexMaxAgeMs: number;
  /** priors until an instance has data */
  priorPrefillMsPerToken: number;
  priorTpotMs: number;
  /** output tokens assumed when the body has no max_tokens */
  defaultMaxTokens: number;
  /** weight of the decode term (expected e2e = TTFT + wDecode · O · TPOT) */
  wDecode: number;
  /** extra weight of the uncached prefill in the cost (not in the TTFT estimate): the prefill a
   *  request adds delays the requests queued behind it, and a cold copy of a prefix evicts others */
  wPrefillLoad: number;
  /** KV pressure: cached credit fades linearly from kvLow to kvHigh usage */
  kvLow: number;
  kvHigh: number;
  /** cost of loading an adapter that is not hot on the instance (ms) */
  loraLoadMs: number;
  /** pool saturation: shortest estimated queueing delay (wait + adapter) among the priced
   *  instances above which sheddable / standard requests get 429 */
  shedSheddableMs: number;
  shedStandardMs: number;
  /** pool saturation by KV cache: every priced instance at or above this usage */
  shedSheddableKv: number;
  shedStandardKv: number;
  /** non-critical requests price these: the index's prefix holders + this many uniform draws */
  draws: number;
}

export const DEFAULT_PROTOTYPE: PrototypeConfig = {
  scrapeMs: 1000,
  bytesPerToken: 4,
  blockBytes: GIE_BLOCK_BYTES,
  maxBlocks: GIE_MAX_BLOCKS,
  indexCapacity: 65_536,
  indexMaxAgeMs: 300_000,
  priorPrefillMsPerToken: 0.1,
  priorTpotMs: 20,
  defaultMaxTokens: 16,
  wDecode: 0,
  wPrefillLoad: 0,
  kvLow: 0.5,
  kvHigh: 1.0,
  loraLoadMs: 40,
  shedSheddableMs: 100,
  shedStandardMs: 200,
  shedSheddableKv: 0.7,
  shedStandardKv: 0.8,
  draws: 2,
};

export interface PriceTerms {
  instance: number;
  waitMs: number;
  prefillMs: number;
  cachedTokens: number;
  loraMs: number;
  ttftMs: number;
  decodeMs: number;
  cost: number;
}

export class RequestAwarePrototype implements RoutingPolicy {
  readonly name: string;
  readonly scrapeMs: number;
  readonly cfg: PrototypeConfig;
  private ctx!: PolicyCtx;
  private rng!: Rng;
  est: WindowEstimator[] = [];
  /** virtual time at which the prefill work this proxy knows of on the instance is done */
  prefillDoneAt: number[] = [];
  /** mean prefill ms charged per request (EWMA), prices the scraped waiting queue */
  meanChargeMs: number[] = [];
  /** adapters sent to the instance since its last scrape */
  sentAdapters: Array<Set<string>> = [];
  /** requests sent since the last scrape / first tokens seen since the last scrape */
  sentSince: number[] = [];
  firstSince: number[] = [];
  /** per instance, this proxy's requests without a first token yet: idx -> [sent at, expected
   *  TTFT] in send order (the oldest first) */
  pending: Array<Map<number, [number, number]>> = [];
  index!: SlotIndex;
  shed: Record<Criticality, number> = { critical: 0, standard: 0, sheddable: 0 };
  private lastTerms: PriceTerms[] = [];
  constructor(cfg: Partial<PrototypeConfig> = {}, name?: string) {
    this.cfg = { ...DEFAULT_PROTOTYPE, ...cfg };
    this.scrapeMs = this.cfg.scrapeMs;
    this.name = name ?? `switchyard-request (${this.scrapeMs} ms)`;
  }
  init(ctx: PolicyCtx): void {
    this.ctx = ctx;
    this.rng = mulberry32(ctx.seed ^ 0x9a7e);
    const n = ctx.instances.length;
    this.est = Array.from({ length: n }, () => new WindowEstimator());
    this.prefillDoneAt = new Array(n).fill(0);
    this.meanChargeMs = new Array(n).fill(0);
    this.sentAdapters = Array.from({ length: n }, () => new Set());
    this.sentSince = new Array(n).fill(0);
    this.firstSince = new Array(n).fill(0);
    this.pending = Array.from({ length: n }, () => new Map());
    this.index = new SlotIndex(this.cfg.indexCapacity, this.cfg.indexMaxAgeMs);
  }
  onScrape(t: number, i: number, m: Scraped): void {
    this.est[i].add(t, m);
    // re-base the prefill backlog on the scraped queue: what waits there, at the mean charge
    this.prefillDoneAt[i] = Math.max(this.prefillDoneAt[i], t + m.numRequestsWaiting * this.meanChargeMs[i]);
    this.sentAdapters[i].clear();
    this.sentSince[i] = 0;
    this.firstSince[i] = 0;
  }
  onFirstToken(_t: number, i: number, r: RouteRequest): void {
    this.firstSince[i]++;
    this.pending[i].delete(r.idx);
  }
  /** head-of-line delay: how much longer than expected the oldest request still waiting for its
   *  first token has waited (0 when none); a request sent now waits at least about as long */
  holDelayMs(t: number, i: number): number {
    for (const [sentAt, expected] of this.pending[i].values()) return Math.max(0, t - sentAt - expected);
    return 0;
  }
  /** requests queued for admission on the instance now: the scraped waiting queue, less the first
   *  tokens seen since, plus what was sent since when the instance was admission-bound then */
  queuedAhead(i: number): number {
    const m = this.est[i].last;
    if (!m || m.numRequestsWaiting === 0) return 0;
    return Math.max(0, m.numRequestsWaiting + this.sentSince[i] - this.firstSince[i]);
  }
  /** time for one running request to finish and make room: E[S] / running */
  drainMs(i: number): number {
    const m = this.est[i].last;
    const es = this.est[i].meanMs((x) => x.inferenceTimeSum, (x) => x.inferenceTimeCount) ?? this.cfg.priorTpotMs * this.cfg.defaultMaxTokens;
    return es / Math.max(1, m?.numRequestsRunning ?? 1);
  }
  tpotMs(i: number): number {
    return this.est[i].meanMs((m) => m.tpotSum, (m) => m.tpotCount) ?? this.cfg.priorTpotMs;
  }
  prefillMsPerToken(i: number): number {
    return this.est[i].prefillMsPerToken(this.tpotMs(i)) ?? this.cfg.priorPrefillMsPerToken;
  }
  kvPressure(i: number): number {
    const u = this.est[i].last?.kvCacheUsagePerc ?? 0;
    const { kvLow, kvHigh } = this.cfg;
    return Math.min(1, Math.max(0, (u - kvLow) / (kvHigh - kvLow)));
  }
  /** cost of the adapter on the instance: 0 when hot (a running/waiting request uses it, or this
   *  proxy sent it one since the scrape); the load time when a slot is free; when every slot is
   *  pinned by adapters with running requests, also the time for those to drain (E[S]) */
  loraCostMs(i: number, model: string): number {
    if (this.adapterHot(i, model)) return 0;
    const m = this.est[i].last;
    if (!m) return this.cfg.loraLoadMs;
    const busy = new Set([...m.runningLoraAdapters, ...this.sentAdapters[i]]);
    if (m.maxLora > 0 && busy.size >= m.maxLora) return this.cfg.loraLoadMs + this.drainMs(i) * Math.max(1, m.numRequestsRunning);
    return this.cfg.loraLoadMs;
  }
  adapterHot(i: number, model: string): boolean {
    const m = this.est[i].last;
    if (this.ctx.instances[i].cfg.models?.includes(model)) return true; // base model: no adapter
    if (this.sentAdapters[i].has(model)) return true;
    return !!m && (m.runningLoraAdapters.includes(model) || m.waitingLoraAdapters.includes(model));
  }
  price(t: number, i: number, r: RouteRequest, matchedBlocks: number): PriceTerms {
    const c = this.cfg;
    const P = Math.ceil(r.promptBytes / c.bytesPerToken);
    const O = r.maxTokens > 0 ? r.maxTokens : c.defaultMaxTokens;
    const tokPerBlock = c.blockBytes / c.bytesPerToken;
    const cached = Math.min(P - 1, matchedBlocks * tokPerBlock) * (1 - this.kvPressure(i));
    const a = this.prefillMsPerToken(i);
    const tpot = this.tpotMs(i);
    const waitMs = Math.max(Math.max(0, this.prefillDoneAt[i] - t) + this.queuedAhead(i) * this.drainMs(i), this.holDelayMs(t, i));
    const prefillMs = a * (P - cached);
    const loraMs = this.loraCostMs(i, r.model);
    const ttftMs = waitMs + loraMs + prefillMs + tpot;
    const decodeMs = c.wDecode * (O - 1) * tpot;
    return { instance: i, waitMs, prefillMs, cachedTokens: cached, loraMs, ttftMs, decodeMs, cost: ttftMs + decodeMs + c.wPrefillLoad * prefillMs };
  }
  /** the priced candidates of the last decision (for tests and the README's worked example) */
  get terms(): PriceTerms[] {
    return this.lastTerms;
  }
  route(t: number, r: RouteRequest): number {
    const c = this.ctx.candidates(r.model);
    const hashes = hashPromptBlocks(r.model, r.text, this.cfg.blockBytes, this.cfg.maxBlocks);
    const match = this.index.lookup(hashes, t);
    let priced: number[];
    if (r.criticality === 'critical') priced = c;
    else {
      const set = new Set<number>();
      for (const s of match.keys()) if (c.includes(s)) set.add(s);
      for (let k = 0; k < this.cfg.draws; k++) set.add(c[Math.floor(this.rng() * c.length)]);
      priced = [...set];
    }
    const terms = priced.map((i) => this.price(t, i, r, match.get(i) ?? 0));
    let best = terms[0];
    for (const x of terms) if (x.cost < best.cost) best = x;
    this.lastTerms = terms;
    // pool saturation: the shortest queueing delay this decision found, or every priced instance's
    // KV cache nearly full (critical never shed)
    let minWait = Infinity;
    let minKv = Infinity;
    for (const x of terms) {
      minWait = Math.min(minWait, x.waitMs + x.loraMs);
      minKv = Math.min(minKv, this.est[x.instance].last?.kvCacheUsagePerc ?? 0);
    }
    const cf = this.cfg;
    if ((r.criticality === 'sheddable' && (minWait > cf.shedSheddableMs || minKv >= cf.shedSheddableKv)) || (r.criticality === 'standard' && (minWait > cf.shedStandardMs || minKv >= cf.shedStandardKv))) {
      this.shed[r.criticality]++;
      return -1;
    }
    const i = best.instance;
    this.prefillDoneAt[i] = Math.max(t, this.prefillDoneAt[i]) + best.prefillMs + Math.min(best.loraMs, this.cfg.loraLoadMs);
    this.meanChargeMs[i] = this.meanChargeMs[i] === 0 ? best.prefillMs : 0.9 * this.meanChargeMs[i] + 0.1 * best.prefillMs;
    if (!this.ctx.instances[i].cfg.models?.includes(r.model)) this.sentAdapters[i].add(r.model);
    this.sentSince[i]++;
    this.pending[i].set(r.idx, [t, best.ttftMs]);
    this.index.record(hashes, i, t);
    return i;
  }
}
