// Per-instance LLM details for the snapshot's LLM section (agent/src/snapshot/llm.ts):
//   - what an instance serves: its /v1/models list (fetched at a slower interval than the
//     scrape), the `vllm:lora_requests_info` gauge (adapters running / waiting, max_lora) and the
//     service's configured static list;
//   - the per-token terms a size-aware cost needs, learned from vLLM's counters and histograms
//     (the estimator is specified, with its error bound, in docs/inference-llm.md);
//   - KV-cache usage (`vllm:kv_cache_usage_perc`, older `vllm:gpu_cache_usage_perc`).
// Metric names per engine: vLLM (V0 and V1) and SGLang, LlmSeries below; test/inference/fixtures/, test/fixtures/engines/.
import * as http from 'node:http';
import { fetchText } from './fetch-text';
import type { Exposition } from './exposition';
import { labelsMatch } from './exposition';
import { MAX_LLM_MODELS, MODEL_BASE, MODEL_LOADED, MODEL_WAITING, type LlmModel } from '../snapshot/llm';

/**
 * The names the LLM signals are read from, per engine. Each list: the first name present wins
 * (current spelling first, older one after). `prefixCounters`: [queries, hits] pairs in prompt
 * tokens; `prefixHitRate`: a lifetime hit-rate gauge (approximate fallback).
 */
export interface LlmSeries {
  promptTokens: string;
  generationTokens: string;
  /** time in the PREFILL phase per request (first scheduled -> first token) */
  prefillTime: string[];
  ttft: string[];
  queueTime: string[];
  /** per output token after the first (weighted per token), preferred spelling first */
  itl: string[];
  loraInfo?: string;
  kvCacheUsage: string[];
  prefixCounters: Array<[queries: string, hits: string]>;
  prefixHitRate: string[];
  /** the running batch gauge (the decode line is fitted against it) */
  running?: string;
  /** info gauges whose labels carry the KV cache size and the sequence cap (vLLM) */
  cacheConfigInfo?: string;
  vllmConfigInfo?: string;
}

/**
 * vLLM, V0 and V1 engines (vllm/engine/metrics.py, vllm/v1/metrics/loggers.py). What V1 renamed:
 * gpu_cache_usage_perc -> kv_cache_usage_perc, time_per_output_token_seconds ->
 * inter_token_latency_seconds, the V0 hit-rate gauge gpu_prefix_cache_hit_rate -> the token counters
 * prefix_cache_queries/hits_total (first V1 releases: gpu_prefix_cache_queries/hits_total);
 * request_prefill_time_seconds is V1 only. Unchanged: num_requests_waiting/running,
 * request_success_total, e2e_request_latency_seconds, prompt/generation_tokens_total,
 * time_to_first_token_seconds, request_queue_time_seconds.
 */
export const VLLM_LLM_SERIES: LlmSeries = {
  promptTokens: 'vllm:prompt_tokens_total',
  generationTokens: 'vllm:generation_tokens_total',
  prefillTime: ['vllm:request_prefill_time_seconds'],
  ttft: ['vllm:time_to_first_token_seconds'],
  queueTime: ['vllm:request_queue_time_seconds'],
  itl: ['vllm:inter_token_latency_seconds', 'vllm:time_per_output_token_seconds'],
  loraInfo: 'vllm:lora_requests_info',
  running: 'vllm:num_requests_running',
  kvCacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
  /**
   * Prefix-cache counters, in prompt tokens. `prompt_tokens_total` counts whole prompts, cached
   * tokens included, so these say which share of it was computed.
   */
  prefixCounters: [
    ['vllm:prefix_cache_queries_total', 'vllm:prefix_cache_hits_total'],
    ['vllm:gpu_prefix_cache_queries_total', 'vllm:gpu_prefix_cache_hits_total'],
  ],
  prefixHitRate: ['vllm:gpu_prefix_cache_hit_rate'],
  /** info gauge (value 1): the CacheConfig as labels, `num_gpu_blocks` and `block_size` among them */
  cacheConfigInfo: 'vllm:cache_config_info',
  /** newer releases' info gauge of the whole VllmConfig, flattened: `cache_config_num_gpu_blocks`, `cache_config_block_size`, `scheduler_config_max_num_seqs` */
  vllmConfigInfo: 'vllm:vllm_config_info',
};

/**
 * SGLang (python/sglang/srt/metrics/collector.py, docs/references/production_metrics.md): the
 * tokenizer manager's token counters and histograms, the scheduler's gauges. Its KV-cache use is
 * `token_usage` (used / max_total_num_tokens). Inter-token latency is observed per decode step with
 * the step's tokens as the count (sum / count = per token); older releases: time_per_output_token.
 * Prefix cache: `cached_tokens_total` against `prompt_tokens_total` (which includes them), else the
 * `cache_hit_rate` gauge. No prefill-phase histogram: TTFT − queue time (`queue_time_seconds`).
 */
export const SGLANG_LLM_SERIES: LlmSeries = {
  promptTokens: 'sglang:prompt_tokens_total',
  generationTokens: 'sglang:generation_tokens_total',
  prefillTime: [],
  ttft: ['sglang:time_to_first_token_seconds'],
  queueTime: ['sglang:queue_time_seconds'],
  itl: ['sglang:inter_token_latency_seconds', 'sglang:time_per_output_token_seconds'],
  running: 'sglang:num_running_reqs',
  kvCacheUsage: ['sglang:token_usage'],
  prefixCounters: [['sglang:prompt_tokens_total', 'sglang:cached_tokens_total']],
  prefixHitRate: ['sglang:cache_hit_rate'],
};

/** The LLM series of a server kind (kinds without their own names read vLLM's: a custom page may mirror them). */
export function llmSeriesOf(kind: string): LlmSeries {
  return kind === 'sglang' ? SGLANG_LLM_SERIES : VLLM_LLM_SERIES;
}

const keepSet = (x: LlmSeries): string[] => [
  x.promptTokens, x.generationTokens, ...(x.loraInfo ? [x.loraInfo] : []),
  ...(x.running ? [x.running] : []), ...(x.cacheConfigInfo ? [x.cacheConfigInfo] : []), ...(x.vllmConfigInfo ? [x.vllmConfigInfo] : []), ...x.kvCacheUsage, ...x.prefixCounters.flat(), ...x.prefixHitRate,
  ...[...x.prefillTime, ...x.ttft, ...x.queueTime, ...x.itl].flatMap((n) => [`${n}_sum`, `${n}_count`]),
];
const KEEP = new Set<string>([...keepSet(VLLM_LLM_SERIES), ...keepSet(SGLANG_LLM_SERIES)]);

/** The sample names the LLM signals read (the parser keeps only mapped samples). */
export function llmSampleFilter(name: string): boolean {
  return KEEP.has(name);
}

export interface SumCount {
  sumMs: number;
  count: number;
}

export interface LoraInfo {
  running: string[];
  waiting: string[];
  /** NaN when the label is absent or not a number */
  maxLora: number;
}

export interface LlmSignals {
  promptTokens?: number;
  generationTokens?: number;
  prefillTime?: SumCount;
  ttft?: SumCount;
  queueTime?: SumCount;
  /** inter-token latency, else time per output token */
  itl?: SumCount;
  kvCacheUsage?: number;
  /** KV-cache capacity in tokens (num_gpu_blocks × block_size of the config info gauges); undefined: not exported */
  kvTokens?: number;
  /** the scheduler's sequence cap (vLLM --max-num-seqs) where an info gauge exports it: the `slots` the estimator uses (source exporter) */
  maxNumSeqs?: number;
  lora?: LoraInfo;
  /** prefix-cache counters (tokens queried / found cached), cumulative; both or neither */
  prefixQueries?: number;
  prefixHits?: number;
  /** V0's lifetime block hit-rate gauge, in [0, 1] */
  prefixHitRate?: number;
  /** requests in the running batch (`vllm:num_requests_running`): the batch the decode line is fitted against */
  running?: number;
}

function sumOf(exp: Exposition, name: string, match?: Record<string, string>): number | undefined {
  const ss = exp.samples.get(name)?.filter((s) => labelsMatch(s.labels, match));
  if (!ss || ss.length === 0) return undefined;
  return ss.reduce((a, s) => a + s.value, 0);
}

function histSumCount(exp: Exposition, name: string, match?: Record<string, string>): SumCount | undefined {
  const sum = sumOf(exp, `${name}_sum`, match);
  const count = sumOf(exp, `${name}_count`, match);
  if (sum === undefined || count === undefined) return undefined;
  return { sumMs: sum * 1000, count };
}

const splitList = (v: string | undefined): string[] => (v ? v.split(',').map((x) => x.trim()).filter(Boolean) : []);

/**
 * vLLM writes one `vllm:lora_requests_info` series per distinct label set, its value the wall-clock
 * time it was last set: the series with the highest value is the current state.
 */
export function loraInfo(exp: Exposition, name = 'vllm:lora_requests_info'): LoraInfo | undefined {
  const ss = exp.samples.get(name);
  if (!ss || ss.length === 0) return undefined;
  let best = ss[0];
  for (const s of ss) if (s.value > best.value) best = s;
  const max = Number(best.labels.max_lora);
  return { running: splitList(best.labels.running_lora_adapters), waiting: splitList(best.labels.waiting_lora_adapters), maxLora: best.labels.max_lora !== undefined && Number.isFinite(max) ? max : NaN };
}

const firstHist = (exp: Exposition, names: string[], match?: Record<string, string>): SumCount | undefined => {
  for (const n of names) {
    const h = histSumCount(exp, n, match);
    if (h) return h;
  }
  return undefined;
};

/**
 * One scrape's LLM signals; `match` restricts to series with these labels (the service's `labels`);
 * `series`: the engine's names (vLLM's by default). The lora gauge has no model label and is read whole.
 */
export function extractLlmSignals(exp: Exposition, match?: Record<string, string>, series: LlmSeries = VLLM_LLM_SERIES): LlmSignals {
  const out: LlmSignals = {};
  out.promptTokens = sumOf(exp, series.promptTokens, match);
  out.generationTokens = sumOf(exp, series.generationTokens, match);
  out.prefillTime = firstHist(exp, series.prefillTime, match);
  out.ttft = firstHist(exp, series.ttft, match);
  out.queueTime = firstHist(exp, series.queueTime, match);
  out.itl = firstHist(exp, series.itl, match);
  for (const name of series.kvCacheUsage) {
    const ss = exp.samples.get(name)?.filter((s) => labelsMatch(s.labels, match) && Number.isFinite(s.value));
    if (ss && ss.length > 0) {
      out.kvCacheUsage = Math.max(...ss.map((s) => s.value));
      break;
    }
  }
  if (series.loraInfo) out.lora = loraInfo(exp, series.loraInfo);
  const running = series.running ? sumOf(exp, series.running, match) : undefined;
  if (running !== undefined && Number.isFinite(running) && running >= 0) out.running = running;
  const cap = configCapacity(exp, match, series);
  if (cap.kvTokens !== undefined) out.kvTokens = cap.kvTokens;
  if (cap.maxNumSeqs !== undefined) out.maxNumSeqs = cap.maxNumSeqs;
  for (const [qn, hn] of series.prefixCounters) {
    const q = sumOf(exp, qn, match);
    const h = sumOf(exp, hn, match);
    if (q !== undefined && h !== undefined) {
      out.prefixQueries = q;
      out.prefixHits = h;
      break;
    }
  }
  for (const name of series.prefixHitRate) {
    const rates = exp.samples.get(name)?.filter((s) => labelsMatch(s.labels, match) && Number.isFinite(s.value) && s.value >= 0 && s.value <= 1);
    if (rates && rates.length > 0) {
      out.prefixHitRate = rates.reduce((a, s) => a + s.value, 0) / rates.length;
      break;
    }
  }
  return out;
}

/** A positive integer label (≤ 2^31), else undefined. */
function intLabel(v: string | undefined): number | undefined {
  if (v === undefined || !/^[0-9]{1,10}$/.test(v)) return undefined;
  const n = Number(v);
  return n >= 1 && n <= 2 ** 31 ? n : undefined;
}

/**
 * What the servers' config info gauges say about capacity: the KV cache in tokens
 * (`vllm:cache_config_info{num_gpu_blocks, block_size}`, else the flattened
 * `vllm:vllm_config_info{cache_config_num_gpu_blocks, cache_config_block_size}`) and the sequence
 * cap (`vllm:vllm_config_info{scheduler_config_max_num_seqs}`; the CacheConfig gauge does not carry
 * it, and vLLM exports no scheduler gauge of its own). Several engines: the sum of their KV
 * tokens, the sum of their caps. Missing or malformed labels: undefined (unknown), never 0.
 */
export function configCapacity(exp: Exposition, match?: Record<string, string>, series: LlmSeries = VLLM_LLM_SERIES): { kvTokens?: number; maxNumSeqs?: number } {
  const out: { kvTokens?: number; maxNumSeqs?: number } = {};
  const sum = (name: string, blocks: string, size: string): number | undefined => {
    const ss = exp.samples.get(name)?.filter((s) => labelsMatch(s.labels, match));
    let t = 0, any = false;
    for (const s of ss ?? []) {
      const b = intLabel(s.labels[blocks]), z = intLabel(s.labels[size]);
      if (b === undefined || z === undefined) continue;
      t += b * z;
      any = true;
    }
    return any ? t : undefined;
  };
  if (!series.cacheConfigInfo && !series.vllmConfigInfo) return out;
  out.kvTokens = (series.cacheConfigInfo ? sum(series.cacheConfigInfo, 'num_gpu_blocks', 'block_size') : undefined) ??
    (series.vllmConfigInfo ? sum(series.vllmConfigInfo, 'cache_config_num_gpu_blocks', 'cache_config_block_size') : undefined);
  const caps = (series.vllmConfigInfo ? exp.samples.get(series.vllmConfigInfo) ?? [] : []).filter((s) => labelsMatch(s.labels, match))
    .map((s) => intLabel(s.labels.scheduler_config_max_num_seqs)).filter((v): v is number => v !== undefined);
  if (caps.length > 0) out.maxNumSeqs = caps.reduce((a, b) => a + b, 0);
  if (out.kvTokens === undefined) delete out.kvTokens;
  return out;
}

// ---------------------------------------------------------------- per-token terms

export interface LlmTerms {
  /** ms per computed (uncached) prompt token: mean prefill time per request / mean computed prompt tokens per request; NaN unknown */
  prefillMsPerToken: number;
  /** ms per output token after the first; NaN unknown */
  decodeMsPerToken: number;
  /** requests (first tokens) and output-token gaps behind the current terms */
  prefillRequests: number;
  decodeTokens: number;
  /** 'prefill-histogram' (vLLM's request_prefill_time) or 'ttft-minus-queue' */
  prefillSource: 'prefill-histogram' | 'ttft-minus-queue' | 'none';
  /**
   * How the computed prompt tokens were told from cached ones: 'prefix-counters' (V1 queries /
   * hits), 'hit-rate-gauge' (V0), 'all-prompt' (no prefix-cache metric: every prompt token
   * counts as computed, right when prefix caching is off, too fast per token when it is on).
   */
  prefillTokens: 'prefix-counters' | 'hit-rate-gauge' | 'all-prompt';
  /** share of prompt tokens found cached behind the current prefill term (0 with 'all-prompt') */
  cachedShare: number;
  /**
   * The decode line, time per output token as a function of the running batch n:
   * d(n) = decodeIdleMs + decodeMsPerSeq · n (docs/inference-llm.md, "Decode against the batch"),
   * fitted on the window's intervals (their mean inter-token latency against their mean running
   * count). NaN both: unknown (too few intervals, or the batch did not vary enough to tell the
   * slope from the intercept).
   */
  decodeIdleMs: number;
  decodeMsPerSeq: number;
}

/** Intervals with decode tokens a decode-line fit needs, and the spread of their running counts
 *  (weighted variance, sequences²) below which the slope is not told from noise. */
export const DECODE_FIT_MIN_INTERVALS = 4;
export const DECODE_FIT_MIN_VARIANCE = 1;

/**
 * Weighted least squares of per-interval mean ITL (ms) on mean running count, weights = the
 * interval's ITL count: (intercept, slope), NaN both when the spread is too small. The slope is
 * kept ≥ 0 (a step never gets cheaper with more sequences) and the intercept ≥ 0 (at n = 0 a step
 * still costs its fixed part): a negative intercept refits through the origin.
 */
export function fitDecodeLine(points: Array<{ running: number; itlMs: number; weight: number }>): { idleMs: number; perSeqMs: number } {
  let w = 0, sx = 0, sy = 0, k = 0;
  for (const p of points) {
    if (!(p.weight > 0) || !Number.isFinite(p.running) || !Number.isFinite(p.itlMs)) continue;
    w += p.weight; sx += p.weight * p.running; sy += p.weight * p.itlMs; k++;
  }
  if (k < DECODE_FIT_MIN_INTERVALS || !(w > 0)) return { idleMs: NaN, perSeqMs: NaN };
  const mx = sx / w, my = sy / w;
  let sxx = 0, sxy = 0;
  for (const p of points) {
    if (!(p.weight > 0) || !Number.isFinite(p.running) || !Number.isFinite(p.itlMs)) continue;
    sxx += p.weight * (p.running - mx) ** 2;
    sxy += p.weight * (p.running - mx) * (p.itlMs - my);
  }
  if (sxx / w < DECODE_FIT_MIN_VARIANCE) return { idleMs: NaN, perSeqMs: NaN };
  let slope = Math.max(0, sxy / sxx);
  let idle = my - slope * mx;
  if (idle < 0) {
    idle = 0;
    slope = mx > 0 ? my / mx : 0;
  }
  return { idleMs: idle, perSeqMs: slope };
}

interface Interval {
  t: number;
  prompt: number;
  firstTokens: number;
  prefillMs: number;
  prefillCount: number;
  /** TTFT − queue form: TTFT and queue sums/counts kept apart (their counts differ: queue time is observed at finish) */
  ttftMs: number;
  queueMs: number;
  prefixQueries: number;
  prefixHits: number;
  queueCount: number;
  itlMs: number;
  itlCount: number;
  /** mean of the running gauge at the interval's two scrapes (NaN: not exported) */
  running: number;
}

export interface LlmTermOptions {
  /** sliding window (s) */
  windowS?: number;
  /** older intervals are kept while the window holds fewer first tokens than this */
  minRequests?: number;
}

const MAX_INTERVALS = 1024;

/**
 * Learns the prefill and decode terms from successive cumulative scrapes (docs/inference-llm.md):
 *   prefill = (Σ prefill time / n) / (Σ computed prompt tokens / n), prefill time = vLLM's
 *             request_prefill_time when exported, else TTFT − queue time (per-request means,
 *             because queue time is observed when a request finishes, TTFT at its first token);
 *             computed = prompt tokens × (1 − prefix-cache hits / queries) over the window
 *             (V0: × (1 − the hit-rate gauge); neither exported: all prompt tokens);
 *   decode  = Σ inter-token latency / its count (time per output token as the fallback).
 * A counter that goes down (restart) re-bases without using the interval. With no new
 * requests the last terms are kept.
 */
export class LlmTermEstimator {
  private prev?: LlmSignals;
  private intervals: Interval[] = [];
  private last: LlmTerms = { prefillMsPerToken: NaN, decodeMsPerToken: NaN, prefillRequests: 0, decodeTokens: 0, prefillSource: 'none', prefillTokens: 'all-prompt', cachedShare: 0, decodeIdleMs: NaN, decodeMsPerSeq: NaN };
  private readonly windowMs: number;
  private readonly minRequests: number;

  constructor(o: LlmTermOptions = {}) {
    this.windowMs = (o.windowS ?? 10) * 1000;
    this.minRequests = o.minRequests ?? 20;
  }

  /** The current terms (no observation). */
  current(): LlmTerms {
    return { ...this.last };
  }

  observe(t: number, s: LlmSignals): LlmTerms {
    const p = this.prev;
    this.prev = s;
    if (p) {
      const d = (a?: number, b?: number): number => (a !== undefined && b !== undefined ? b - a : 0);
      const iv: Interval = {
        t,
        prompt: d(p.promptTokens, s.promptTokens),
        firstTokens: d(p.ttft?.count, s.ttft?.count),
        prefillMs: d(p.prefillTime?.sumMs, s.prefillTime?.sumMs),
        prefillCount: d(p.prefillTime?.count, s.prefillTime?.count),
        ttftMs: d(p.ttft?.sumMs, s.ttft?.sumMs),
        queueMs: d(p.queueTime?.sumMs, s.queueTime?.sumMs),
        prefixQueries: d(p.prefixQueries, s.prefixQueries),
        prefixHits: d(p.prefixHits, s.prefixHits),
        queueCount: d(p.queueTime?.count, s.queueTime?.count),
        itlMs: d(p.itl?.sumMs, s.itl?.sumMs),
        itlCount: d(p.itl?.count, s.itl?.count),
        running: 0,
      };
      const running = p.running !== undefined && s.running !== undefined ? (p.running + s.running) / 2 : NaN;
      const values = Object.values(iv);
      // a restart (counters down) or broken values: re-base, do not use the interval
      if (values.every((v) => Number.isFinite(v) && v >= 0)) this.intervals.push({ ...iv, running });
    }
    this.trim(t);
    this.compute(s);
    return { ...this.last };
  }

  private trim(t: number): void {
    let inWindow = 0;
    let keepFrom = this.intervals.length;
    for (let i = this.intervals.length - 1; i >= 0; i--) {
      const iv = this.intervals[i];
      if (t - iv.t > this.windowMs && inWindow >= this.minRequests) break;
      inWindow += iv.firstTokens;
      keepFrom = i;
    }
    this.intervals.splice(0, Math.max(keepFrom, this.intervals.length - MAX_INTERVALS));
  }

  private compute(s: LlmSignals): void {
    let prompt = 0, first = 0, prefill = 0, prefillN = 0, ttft = 0, queue = 0, queueN = 0, itl = 0, itlN = 0, pq = 0, ph = 0;
    for (const iv of this.intervals) {
      prompt += iv.prompt; first += iv.firstTokens; prefill += iv.prefillMs; prefillN += iv.prefillCount; ttft += iv.ttftMs;
      queue += iv.queueMs; queueN += iv.queueCount; itl += iv.itlMs; itlN += iv.itlCount; pq += iv.prefixQueries; ph += iv.prefixHits;
    }
    // vLLM's prompt-token counter includes cached tokens, which cost no prefill: dividing by it
    // makes an instance serving cached prefixes look fast per token and draws new prompts to it
    let cached = 0;
    let basis: LlmTerms['prefillTokens'] = 'all-prompt';
    if (s.prefixQueries !== undefined && pq > 0) {
      cached = Math.min(1, ph / pq);
      basis = 'prefix-counters';
    } else if (s.prefixHitRate !== undefined) {
      cached = s.prefixHitRate;
      basis = 'hit-rate-gauge';
    }
    if (first > 0 && prompt > 0) {
      // at least the last prompt token is computed for every request (it yields the first token's logits)
      const promptPerReq = Math.max(1, (prompt * (1 - cached)) / first);
      let perReq = NaN;
      let source: LlmTerms['prefillSource'] = 'none';
      if (s.prefillTime !== undefined && prefillN > 0) {
        // observed when a request finishes (like queue time), so averaged over its own count
        perReq = prefill / prefillN;
        source = 'prefill-histogram';
      } else if (queueN > 0) {
        perReq = Math.max(0, ttft / first - queue / queueN);
        source = 'ttft-minus-queue';
      }
      if (Number.isFinite(perReq) && perReq > 0) {
        this.last.prefillMsPerToken = perReq / promptPerReq;
        this.last.prefillRequests = first;
        this.last.prefillSource = source;
        this.last.prefillTokens = basis;
        this.last.cachedShare = cached;
      }
    }
    if (itlN > 0 && itl > 0) {
      this.last.decodeMsPerToken = itl / itlN;
      this.last.decodeTokens = itlN;
      // the decode line: refitted on every window that can tell slope from intercept, else kept
      const line = fitDecodeLine(this.intervals.map((iv) => ({ running: iv.running, itlMs: iv.itlCount > 0 ? iv.itlMs / iv.itlCount : NaN, weight: iv.itlCount })));
      if (Number.isFinite(line.idleMs)) {
        this.last.decodeIdleMs = line.idleMs;
        this.last.decodeMsPerSeq = line.perSeqMs;
      }
    }
  }
}

// ---------------------------------------------------------------- models

export interface ServedModels {
  /** base models (entries without a parent) */
  base: string[];
  /** LoRA adapters (entries with a parent) */
  adapters: string[];
}

export const MAX_MODELS_BODY_BYTES = 1024 * 1024;
/** entries of a /v1/models answer read; later ones are ignored */
export const MAX_SERVED_MODELS = 1024;

/** The OpenAI-style /v1/models answer vLLM gives ({data: [{id, parent?}]}); throws naming the field. */
export function parseModelsList(body: string): ServedModels {
  let o: unknown;
  try {
    o = JSON.parse(body);
  } catch (e) {
    throw new Error(`/v1/models: not JSON (${(e as Error).message})`);
  }
  const data = (o as { data?: unknown })?.data;
  if (!Array.isArray(data)) throw new Error('/v1/models: data: must be an array');
  const out: ServedModels = { base: [], adapters: [] };
  // what is kept per instance between fetches is bounded (the published list is bounded again, at 64)
  data.slice(0, MAX_SERVED_MODELS).forEach((m, i) => {
    const id = (m as { id?: unknown })?.id;
    if (typeof id !== 'string' || id.length === 0) throw new Error(`/v1/models: data[${i}].id: must be a non-empty string`);
    const parent = (m as { parent?: unknown }).parent;
    (typeof parent === 'string' && parent.length > 0 ? out.adapters : out.base).push(id);
  });
  return out;
}

/**
 * The published model list of an instance: the union of the configured list (base models),
 * /v1/models and the adapters the LoRA gauge names, flagged, ordered loaded, waiting, base,
 * then the rest, and bounded by MAX_LLM_MODELS; names longer than 255 UTF-8 bytes (the wire's
 * string bound) are left out and counted in `dropped`.
 */
export function modelList(configured: string[], served: ServedModels | undefined, lora: LoraInfo | undefined): { models: LlmModel[]; dropped: number } {
  const flags = new Map<string, number>();
  const add = (n: string, f: number): void => void flags.set(n, (flags.get(n) ?? 0) | f);
  for (const n of configured) add(n, MODEL_BASE);
  for (const n of served?.base ?? []) add(n, MODEL_BASE);
  for (const n of served?.adapters ?? []) add(n, 0);
  for (const n of lora?.running ?? []) add(n, MODEL_LOADED);
  for (const n of lora?.waiting ?? []) add(n, MODEL_WAITING);
  const rank = (f: number): number => (f & MODEL_LOADED ? 0 : f & MODEL_WAITING ? 1 : f & MODEL_BASE ? 2 : 3);
  let dropped = 0;
  const all: LlmModel[] = [];
  for (const [name, f] of flags) {
    if (Buffer.byteLength(name, 'utf8') > 255) dropped++;
    else all.push({ name, flags: f });
  }
  all.sort((a, b) => rank(a.flags) - rank(b.flags) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (all.length > MAX_LLM_MODELS) dropped += all.length - MAX_LLM_MODELS;
  return { models: all.slice(0, MAX_LLM_MODELS), dropped };
}

/**
 * GET scheme://addr{path} (the instance's model list), bounded (fetch-text.ts: `timeoutMs`, at
 * most MAX_MODELS_BODY_BYTES). Rejects with an Error whose message starts with the path and says
 * why; a malformed list with parseModelsList's own error (it names /v1/models itself).
 */
export async function fetchModels(addr: string, path: string, scheme: 'http' | 'https', timeoutMs: number, agent?: http.Agent): Promise<ServedModels> {
  return parseModelsList(await fetchText(addr, path, scheme, timeoutMs, MAX_MODELS_BODY_BYTES, agent));
}
