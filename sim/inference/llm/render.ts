// /metrics of the LLM simulator with vLLM's (V1 engine) metric names, label sets, HELP texts
// and prometheus_client number formatting. Names checked against vLLM's metrics design doc
// (docs/design/metrics.md) and vllm/v1/metrics/loggers.py; see docs/inference-sim.md.
import type { CumHistogram } from '../queue';
import type { LlmEngine } from './engine';

type Labels = Array<[string, string]>;

function py(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (Number.isInteger(v) && Math.abs(v) < 1e16) return v.toFixed(1);
  return String(v);
}

function lbl(labels: Labels): string {
  return labels.length ? `{${labels.map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`).join(',')}}` : '';
}

function hist(o: string[], name: string, help: string, h: CumHistogram, L: Labels): void {
  o.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
  const cum = h.cumulative();
  const withLe = (le: string): Labels => [...L, ['le', le] as [string, string]].sort((a, z) => (a[0] < z[0] ? -1 : 1));
  h.bounds.forEach((b, i) => o.push(`${name}_bucket${lbl(withLe(py(b)))} ${py(cum[i])}`));
  o.push(`${name}_bucket${lbl(withLe('+Inf'))} ${py(cum[cum.length - 1])}`, `${name}_count${lbl(L)} ${py(h.count)}`, `${name}_sum${lbl(L)} ${py(h.sum)}`);
}

export interface LlmRenderState {
  engine: LlmEngine;
  /** model_name label (vLLM: the served model name, the first base model) */
  modelName: string;
  /** wall-clock seconds: the value of vllm:lora_requests_info */
  nowS: number;
}

/** Per-adapter request counts as vLLM formats them: "a,b" of the adapters with requests. */
function adapterList(reqs: Array<{ adapter: string }>): string {
  const seen: string[] = [];
  for (const r of reqs) if (r.adapter && !seen.includes(r.adapter)) seen.push(r.adapter);
  return seen.join(',');
}

export function renderLlmVllm(s: LlmRenderState): string {
  const e = s.engine;
  const st = e.stats;
  const L: Labels = [
    ['engine', '0'],
    ['model_name', s.modelName],
  ];
  const o: string[] = [];
  const one = (name: string, type: 'gauge' | 'counter', help: string, v: number, labels: Labels = L): void => {
    o.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}${lbl(labels)} ${py(v)}`);
  };
  one('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', e.running.length);
  one('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', e.waiting.length);
  one('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', e.kvUsage());
  one('vllm:prefix_cache_queries_total', 'counter', 'Prefix cache queries, in terms of number of queried tokens.', st.prefixQueries);
  one('vllm:prefix_cache_hits_total', 'counter', 'Prefix cache hits, in terms of number of cached tokens.', st.prefixHits);
  one('vllm:num_preemptions_total', 'counter', 'Cumulative number of preemption from the engine.', st.preemptions);
  one('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', st.promptTokens);
  one('vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.', st.generationTokens);
  o.push('# HELP vllm:request_success_total Count of successfully processed requests.', '# TYPE vllm:request_success_total counter');
  for (const reason of ['abort', 'length', 'stop']) {
    const v = reason === 'length' ? st.finished : reason === 'abort' ? st.aborted : 0;
    o.push(`vllm:request_success_total${lbl([['engine', '0'], ['finished_reason', reason], ['model_name', s.modelName]])} ${py(v)}`);
  }
  hist(o, 'vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', st.ttft, L);
  hist(o, 'vllm:time_per_output_token_seconds', 'Histogram of time per output token in seconds.', st.tpot, L);
  hist(o, 'vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', st.itl, L);
  hist(o, 'vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', st.e2e, L);
  hist(o, 'vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', st.queueTime, L);
  hist(o, 'vllm:request_inference_time_seconds', 'Histogram of time spent in RUNNING phase for request.', st.inferenceTime, L);
  const c = e.cfg;
  one('vllm:cache_config_info', 'gauge', 'Information of the LLMEngine CacheConfig', 1, [
    ['block_size', String(c.blockSize)],
    ['enable_prefix_caching', c.enablePrefixCaching ? 'True' : 'False'],
    ['engine', '0'],
    ['num_gpu_blocks', String(c.numBlocks)],
  ]);
  if (Object.keys(c.adapters).length > 0) {
    one('vllm:lora_requests_info', 'gauge', 'Running stats on lora requests.', s.nowS, [
      ['max_lora', String(c.maxLoras)],
      ['running_lora_adapters', adapterList(e.running)],
      ['waiting_lora_adapters', adapterList(e.waiting)],
    ]);
  }
  return o.join('\n') + '\n';
}
