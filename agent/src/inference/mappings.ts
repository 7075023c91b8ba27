// Metric-name mappings: which exposition series feed which load signal, per server kind,
// and extraction of one scrape's Signals (all times converted to milliseconds).
import { type Exposition, histogramSeries, labelsMatch, parsePromFloat } from './exposition';

// A GPU-only exporter (DCGM) is not a kind: it has no request metrics, so an instance made of it
// could never be priced. It is paired with the inference instance it belongs to (service `gpu`).
export type ServerKind = 'vllm' | 'sglang' | 'triton' | 'tgi' | 'custom';
export type TimeUnit = 's' | 'ms' | 'us' | 'ns';

export const UNIT_TO_MS: Record<TimeUnit, number> = { s: 1000, ms: 1, us: 1e-3, ns: 1e-6 };

export interface TimedRef {
  name: string;
  unit: TimeUnit;
}
export interface ScaledRef {
  name: string;
  /** value * scale gives the signal's unit (0..1 for utilisation) */
  scale: number;
}

/**
 * For every list the first name present in the exposition wins (so a current name can be
 * listed before its older spelling). Gauges/counters are summed over all matching series
 * (several models, engines or GPUs), utilisations averaged, kv-cache usage maxed.
 */
export interface MetricMappings {
  /** requests queued, not yet executing (gauge) */
  waiting: string[];
  /** requests executing / in the running batch (gauge) */
  running: string[];
  /** KV-cache usage 0..1 (gauge) */
  kvCacheUsage: string[];
  gpuUtil: ScaledRef[];
  /** completed requests (counter); used when no histogram gives a count */
  completions: string[];
  /**
   * slot count / max batch size (gauge). SGLang: max_running_requests. vLLM (cache_config_info
   * carries cache settings, not max_num_seqs), Triton (counts, durations, pending count, GPU; its
   * slots come from the model configuration instead, triton.ts) and TGI (tgi_batch_current_size is
   * the current batch, not its limit) export none; a custom mapping can name one.
   */
  slots: string[];
  /** cumulative service (or request) time (counter) -- Triton style */
  serviceTimeSum: TimedRef[];
  /** cumulative queueing time (counter); subtracted from serviceTimeSum */
  queueTimeSum: TimedRef[];
  /** per-request service-time histogram (E[S], E[S^2], lambda) */
  serviceHistogram: TimedRef[];
  /** per-request end-to-end latency histogram (P50/P99) */
  latencyHistogram: TimedRef[];
  /** summary with quantile="0.5"/"0.99" (fallback for P50/P99) */
  latencySummary: TimedRef[];
}

/** Config form of custom mappings (schema.ts): a name or list of names per signal. */
export interface CustomMappingsInput {
  waiting?: string | string[];
  running?: string | string[];
  kvCacheUsage?: string | string[];
  completions?: string | string[];
  slots?: string | string[];
  gpuUtil?: { name: string; scale?: number };
  serviceTimeSum?: { name: string; unit?: TimeUnit };
  queueTimeSum?: { name: string; unit?: TimeUnit };
  serviceHistogram?: { name: string; unit?: TimeUnit };
  latencyHistogram?: { name: string; unit?: TimeUnit };
  latencySummary?: { name: string; unit?: TimeUnit };
}


/** GPU series understood for every kind (Triton's own gauges, or a paired DCGM exporter's page: service `gpu`). */
// GPU memory is not read: nothing in the snapshot or the estimates uses it.
export const GPU_GENERIC: Pick<MetricMappings, 'gpuUtil'> = {
  gpuUtil: [
    { name: 'DCGM_FI_DEV_GPU_UTIL', scale: 0.01 },
    { name: 'nv_gpu_utilization', scale: 1 },
  ],
};

function empty(): MetricMappings {
  return {
    waiting: [],
    running: [],
    kvCacheUsage: [],
    completions: [],
    slots: [],
    serviceTimeSum: [],
    queueTimeSum: [],
    serviceHistogram: [],
    latencyHistogram: [],
    latencySummary: [],
    ...structuredClone(GPU_GENERIC),
  };
}

export const BUILTIN_MAPPINGS: Record<ServerKind, MetricMappings> = {
  // vLLM V0 and V1 share these names; what V1 renamed (the KV gauge, the per-token and prefix
  // series) is listed, both spellings, in llm.ts (VLLM_LLM_SERIES)
  vllm: {
    ...empty(),
    waiting: ['vllm:num_requests_waiting'],
    running: ['vllm:num_requests_running'],
    kvCacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
    completions: ['vllm:request_success_total'],
    // service time = time in the running batch (prefill + decode); e2e also counts queueing,
    // which the M/G/1 formula adds itself. Older vLLM has only e2e: used as a fallback.
    serviceHistogram: [
      { name: 'vllm:request_inference_time_seconds', unit: 's' },
      { name: 'vllm:e2e_request_latency_seconds', unit: 's' },
    ],
    latencyHistogram: [{ name: 'vllm:e2e_request_latency_seconds', unit: 's' }],
  },
  triton: {
    ...empty(),
    waiting: ['nv_inference_pending_request_count'],
    completions: ['nv_inference_request_success'],
    serviceTimeSum: [{ name: 'nv_inference_request_duration_us', unit: 'us' }],
    queueTimeSum: [{ name: 'nv_inference_queue_duration_us', unit: 'us' }],
    // only with --metrics-config summary_latencies=true
    latencySummary: [{ name: 'nv_inference_request_summary_us', unit: 'us' }],
  },
  // SGLang (python/sglang/srt/metrics/collector.py; docs/references/production_metrics.md): the
  // scheduler's gauges and the tokenizer manager's counters and histograms, label model_name (newer
  // releases add engine_type, tp_rank, pp_rank, ...: summed, or picked with `labels`).
  sglang: {
    ...empty(),
    waiting: ['sglang:num_queue_reqs'],
    running: ['sglang:num_running_reqs'],
    kvCacheUsage: ['sglang:token_usage'],
    completions: ['sglang:num_requests_total'],
    // the older production-metrics page lists a max_running_requests gauge (the scheduler's limit)
    slots: ['sglang:max_running_requests'],
    // SGLang has no in-batch service-time histogram: e2e (queueing included) is the service
    // histogram, as for vLLM releases without request_inference_time
    serviceHistogram: [{ name: 'sglang:e2e_request_latency_seconds', unit: 's' }],
    latencyHistogram: [{ name: 'sglang:e2e_request_latency_seconds', unit: 's' }],
  },
  tgi: {
    ...empty(),
    waiting: ['tgi_queue_size'],
    running: ['tgi_batch_current_size'],
    completions: ['tgi_request_success'],
    serviceHistogram: [
      { name: 'tgi_request_inference_duration', unit: 's' },
      { name: 'tgi_request_duration', unit: 's' },
    ],
    latencyHistogram: [{ name: 'tgi_request_duration', unit: 's' }],
  },
  custom: empty(),
};

const asList = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** Built-in mappings of `kind` with the custom ones taking precedence (prepended). */
export function resolveMappings(kind: ServerKind, custom?: CustomMappingsInput): MetricMappings {
  const m = structuredClone(BUILTIN_MAPPINGS[kind]);
  if (!custom) return m;
  for (const k of ['waiting', 'running', 'kvCacheUsage', 'completions', 'slots'] as const) m[k] = [...asList(custom[k]), ...m[k]];
  for (const k of ['gpuUtil'] as const) {
    const c = custom[k];
    if (c) m[k] = [{ name: c.name, scale: c.scale ?? 1 }, ...m[k]];
  }
  for (const k of ['serviceTimeSum', 'queueTimeSum', 'serviceHistogram', 'latencyHistogram', 'latencySummary'] as const) {
    const c = custom[k];
    if (c) m[k] = [{ name: c.name, unit: c.unit ?? 's' }, ...m[k]];
  }
  return m;
}

export interface Hist {
  /** finite upper bounds in ms, ascending */
  boundsMs: number[];
  /** cumulative counts, length boundsMs.length + 1 (last = +Inf) */
  cumulative: number[];
  sumMs: number;
  count: number;
}

export interface Signals {
  waiting?: number;
  running?: number;
  kvCacheUsage?: number;
  gpuUtil?: number;
  /** cumulative completions (counter) */
  completions?: number;
  /** slot count (max batch size) when the server exports it (mapping `slots`) */
  slots?: number;
  /** cumulative service time in ms (counter-based servers) */
  serviceSumMs?: number;
  /** cumulative queueing time in ms (mapping queueTimeSum), when exported */
  queueSumMs?: number;
  serviceHist?: Hist;
  latencyHist?: Hist;
  summaryP50Ms?: number;
  summaryP99Ms?: number;
  /** metric names that were found */
  matched: string[];
}

/**
 * `keepNaN`: the load gauges and counters (waiting, running, completions, service-time sums) keep
 * a NaN sample, so the estimator sees the broken value and marks the instance unhealthy instead of
 * silently reading a missing series; auxiliary signals (GPU, KV cache) drop NaN samples.
 */
function pickGauge(exp: Exposition, names: string[], agg: 'sum' | 'max' | 'mean', match?: Record<string, string>, scale = 1, keepNaN = false): [number, string] | undefined {
  for (const name of names) {
    const ss = exp.samples.get(name)?.filter((s) => labelsMatch(s.labels, match) && (keepNaN || !Number.isNaN(s.value)));
    if (!ss || ss.length === 0) continue;
    let v = agg === 'max' ? -Infinity : 0;
    for (const s of ss) v = agg === 'max' ? Math.max(v, s.value) : v + s.value;
    if (agg === 'mean') v /= ss.length;
    return [v * scale, name];
  }
  return undefined;
}

function pickScaled(exp: Exposition, refs: ScaledRef[], agg: 'sum' | 'mean', match?: Record<string, string>): [number, string] | undefined {
  for (const r of refs) {
    const got = pickGauge(exp, [r.name], agg, match, r.scale);
    if (got) return got;
  }
  return undefined;
}

/** Sum of all series of the first present histogram whose bounds equal the first series'. */
function pickHist(exp: Exposition, refs: TimedRef[], match?: Record<string, string>): [Hist, string] | undefined {
  for (const r of refs) {
    const series = histogramSeries(exp, r.name, match);
    if (series.length === 0) continue;
    const f = UNIT_TO_MS[r.unit];
    const base = series[0];
    const h: Hist = { boundsMs: base.bounds.map((b) => b * f), cumulative: base.cumulative.slice(), sumMs: base.sum * f, count: base.count };
    for (const s of series.slice(1)) {
      if (s.bounds.length !== base.bounds.length || s.bounds.some((b, i) => b !== base.bounds[i])) continue; // different layout: ignored
      s.cumulative.forEach((c, i) => (h.cumulative[i] += c));
      h.sumMs += s.sum * f;
      h.count += s.count;
    }
    return [h, r.name];
  }
  return undefined;
}

function pickSummaryQuantile(exp: Exposition, refs: TimedRef[], q: string, match?: Record<string, string>): [number, string] | undefined {
  for (const r of refs) {
    const ss = exp.samples.get(r.name)?.filter((s) => labelsMatch(s.labels, match) && s.labels.quantile !== undefined && parsePromFloat(s.labels.quantile) === Number(q) && !Number.isNaN(s.value));
    if (!ss || ss.length === 0) continue;
    // several series (models): the worst one is what a request may hit
    return [Math.max(...ss.map((s) => s.value)) * UNIT_TO_MS[r.unit], r.name];
  }
  return undefined;
}

/** One scrape's signals. Throws (Error) on structurally broken histograms. */
export function extractSignals(exp: Exposition, m: MetricMappings, match?: Record<string, string>): Signals {
  // a page over a storage bound holds truncated families: refused, never priced (exposition.ts)
  if (exp.overBound) throw new Error(`${exp.overBound} (${exp.dropped ?? 0} samples dropped)`);
  const sig: Signals = { matched: [] };
  const take = <T>(got: [T, string] | undefined, set: (v: T) => void): void => {
    if (!got) return;
    set(got[0]);
    sig.matched.push(got[1]);
  };
  // negative / non-finite values are passed through: the estimator rejects them with a reason
  take(pickGauge(exp, m.waiting, 'sum', match, 1, true), (v) => (sig.waiting = v));
  take(pickGauge(exp, m.running, 'sum', match, 1, true), (v) => (sig.running = v));
  take(pickGauge(exp, m.slots, 'max', match), (v) => (sig.slots = v));
  take(pickGauge(exp, m.kvCacheUsage, 'max', match), (v) => (sig.kvCacheUsage = v));
  take(pickScaled(exp, m.gpuUtil, 'mean', match), (v) => (sig.gpuUtil = Math.min(1, Math.max(0, v))));
  take(pickGauge(exp, m.completions, 'sum', match, 1, true), (v) => (sig.completions = v));
  const svcSum = pickSumCounter(exp, m.serviceTimeSum, match);
  if (svcSum) {
    sig.matched.push(svcSum[1]);
    const q = pickSumCounter(exp, m.queueTimeSum, match);
    if (q) {
      sig.matched.push(q[1]);
      sig.queueSumMs = q[0];
    }
    // a queue-time sum larger than the request-time sum is a broken exporter: kept negative, rejected by the estimator
    sig.serviceSumMs = svcSum[0] - (q ? q[0] : 0);
  }
  take(pickHist(exp, m.serviceHistogram, match), (v) => (sig.serviceHist = v));
  take(pickHist(exp, m.latencyHistogram, match), (v) => (sig.latencyHist = v));
  take(pickSummaryQuantile(exp, m.latencySummary, '0.5', match), (v) => (sig.summaryP50Ms = v));
  take(pickSummaryQuantile(exp, m.latencySummary, '0.99', match), (v) => (sig.summaryP99Ms = v));
  sig.matched = [...new Set(sig.matched)];
  return sig;
}

function pickSumCounter(exp: Exposition, refs: TimedRef[], match?: Record<string, string>): [number, string] | undefined {
  for (const r of refs) {
    const got = pickGauge(exp, [r.name], 'sum', match, UNIT_TO_MS[r.unit], true);
    if (got) return got;
  }
  return undefined;
}

/**
 * Sample-name filter for the parser: only the series the mappings can read are stored (a page of
 * unrelated metrics is validated but costs no memory).
 */
export function mappedSampleFilter(m: MetricMappings): (sampleName: string) => boolean {
  const names = new Set<string>();
  for (const v of Object.values(m) as Array<Array<string | { name: string }>>) for (const r of v) names.add(typeof r === 'string' ? r : r.name);
  return (n) => names.has(n) || names.has(n.replace(/_(?:bucket|sum|count)$/, ''));
}

/** True when the scrape carries at least one load signal (else: reason no_data). */
export function hasLoadSignal(s: Signals): boolean {
  return (
    s.waiting !== undefined ||
    s.running !== undefined ||
    s.completions !== undefined ||
    s.serviceHist !== undefined ||
    s.latencyHist !== undefined ||
    s.serviceSumMs !== undefined ||
    s.gpuUtil !== undefined
  );
}
