// llm-d's current default scheduling ("optimized baseline", llm-d/llm-d guides/optimized-baseline;
// the plugins in llm-d/llm-d-router pkg/epp/framework/plugins/scheduling/filter/prefixcacheaffinity
// and …/scorer/tokenload, the in-flight load producer under …/requestcontrol/dataproducer/inflightload;
// the strategy in llm-d's "Sticky Until Saturated" post), implemented from its documented behaviour:
// - approx-prefix-cache-producer: the prompt cut in blocks and chain-hashed, a per-endpoint LRU of
//   the hashes of what was sent there (as GIE's prefix indexer: prefix.ts GieIndexer); an
//   endpoint's prefix score = its longest leading match / the request's blocks;
// - inflight-load-producer: per endpoint, the uncached prompt tokens (bytes / 4, less the blocks
//   the index says it holds) of the requests dispatched there and not ended;
// - prefix-cache-affinity-filter (affinityThreshold 0.80, explorationProbability 0,
//   maxTTFTPenaltyMs 18 000): keeps the endpoints whose prefix score ≥ 0.80 ("sticky"); none: all
//   kept. Load gate: each endpoint's TTFT estimated as (its in-flight tokens + this request's
//   uncached tokens there) / peakPrefillThroughput; if the best sticky estimate exceeds the best
//   non-sticky one by more than maxTTFTPenaltyMs, stickiness is broken (all kept);
// - token-load-scorer (queueThresholdTokens 4 194 304): 1 − min(1, tokens / threshold), tokens =
//   the endpoint's in-flight uncached tokens plus this request's uncached tokens there;
// - max-score-picker: the highest score, random among ties.
// peakPrefillThroughput is calibrated as the plugin's README says (the prefill throughput of one
// unloaded chunk of max_num_batched_tokens on this deployment), not its Qwen3-32B/H100 default.
import { mulberry32, type Rng } from '../../sim/inference/prng';
import type { PolicyCtx, RouteRequest, RoutingPolicy } from './fleet';
import { GIE_BLOCK_BYTES, GIE_MAX_BLOCKS, GieIndexer, hashPromptBlocks } from './prefix';

export interface LlmdConfig {
  affinityThreshold: number;
  explorationProbability: number;
  maxTTFTPenaltyMs: number;
  /** tokens / s */
  peakPrefillThroughput: number;
  queueThresholdTokens: number;
}

export const LLMD_DEFAULTS: Omit<LlmdConfig, 'peakPrefillThroughput'> = { affinityThreshold: 0.8, explorationProbability: 0, maxTTFTPenaltyMs: 18_000, queueThresholdTokens: 4_194_304 };

/** The calibration recipe's figure for an engine: one unloaded chunk of max_num_batched_tokens. */
export function calibratedPeakPrefill(cfg: { stepBaseMs: number; prefillMsPerToken: number; maxNumBatchedTokens: number }): number {
  return cfg.maxNumBatchedTokens / ((cfg.stepBaseMs + cfg.prefillMsPerToken * cfg.maxNumBatchedTokens) / 1000);
}

export class LlmdOptimizedBaseline implements RoutingPolicy {
  readonly name = 'llm-d default (affinity filter + token load)';
  readonly scrapeMs = 0;
  private ctx!: PolicyCtx;
  private rng!: Rng;
  readonly indexer = new GieIndexer();
  /** per endpoint: uncached tokens in flight */
  tokens: number[] = [];
  private booked = new Map<number, number>();
  readonly cfg: LlmdConfig;
  constructor(cfg: Partial<LlmdConfig> & { peakPrefillThroughput: number }) {
    this.cfg = { ...LLMD_DEFAULTS, ...cfg };
  }
  init(ctx: PolicyCtx): void {
    this.ctx = ctx;
    this.rng = mulberry32(ctx.seed ^ 0x11d);
    this.tokens = new Array(ctx.instances.length).fill(0);
  }
  route(_t: number, r: RouteRequest): number {
    const c = this.ctx.candidates(r.model);
    const hashes = r.text.length >= GIE_BLOCK_BYTES ? hashPromptBlocks(r.model, r.text, GIE_BLOCK_BYTES, GIE_MAX_BLOCKS) : [];
    const match = hashes.length ? this.indexer.matchLongestPrefix(hashes) : new Map<number, number>();
    const promptTokens = Math.ceil(r.promptBytes / 4);
    const uncached = (i: number): number => Math.max(0, promptTokens - ((match.get(i) ?? 0) * GIE_BLOCK_BYTES) / 4);
    const score = (i: number): number => (hashes.length ? (match.get(i) ?? 0) / hashes.length : 0);
    let kept = c;
    const sticky = c.filter((i) => score(i) >= this.cfg.affinityThreshold);
    if (sticky.length && sticky.length < c.length && !(this.rng() < this.cfg.explorationProbability)) {
      const ttft = (i: number): number => ((this.tokens[i] + uncached(i)) / this.cfg.peakPrefillThroughput) * 1000;
      const bestSticky = Math.min(...sticky.map(ttft));
      const bestOther = Math.min(...c.filter((i) => !sticky.includes(i)).map(ttft));
      kept = this.cfg.maxTTFTPenaltyMs > 0 && bestSticky - bestOther > this.cfg.maxTTFTPenaltyMs ? c : sticky;
    }
    let best = -Infinity;
    let pick = -1;
    let ties = 0;
    for (const i of kept) {
      const s = 1 - Math.min(1, (this.tokens[i] + uncached(i)) / this.cfg.queueThresholdTokens);
      if (s > best) { best = s; pick = i; ties = 1; } else if (s === best && this.rng() * ++ties < 1) pick = i;
    }
    const u = uncached(pick);
    this.tokens[pick] += u;
    this.booked.set(r.idx, u);
    if (hashes.length) this.indexer.add(hashes, pick);
    return pick;
  }
  onComplete(_t: number, i: number, r: RouteRequest): void {
    this.tokens[i] -= this.booked.get(r.idx) ?? 0;
    this.booked.delete(r.idx);
  }
}
