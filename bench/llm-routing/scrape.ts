// What a metrics scrape of one instance shows a policy: exactly the values the simulator renders
// on /metrics under vLLM's names (sim/inference/llm/render.ts), read from the engine directly
// instead of rendered and re-parsed (thousands of scrapes per run). Nothing else of the engine's
// state reaches a policy.
import type { LlmEngine } from '../../sim/inference/llm/engine';

export interface Scraped {
  /** vllm:num_requests_waiting */
  numRequestsWaiting: number;
  /** vllm:num_requests_running */
  numRequestsRunning: number;
  /** vllm:kv_cache_usage_perc (0..1) */
  kvCacheUsagePerc: number;
  /** vllm:prompt_tokens_total (whole prompts, cached tokens included, as vLLM) */
  promptTokensTotal: number;
  /** vllm:generation_tokens_total */
  generationTokensTotal: number;
  /** vllm:prefix_cache_queries_total / _hits_total (tokens) */
  prefixCacheQueriesTotal: number;
  prefixCacheHitsTotal: number;
  /** vllm:request_success_total (all finished reasons) */
  requestSuccessTotal: number;
  /** histogram _sum (seconds) and _count */
  ttftSum: number;
  ttftCount: number;
  queueTimeSum: number;
  queueTimeCount: number;
  tpotSum: number;
  tpotCount: number;
  inferenceTimeSum: number;
  inferenceTimeCount: number;
  /** vllm:lora_requests_info labels: adapters with running / waiting requests */
  runningLoraAdapters: string[];
  waitingLoraAdapters: string[];
  /** vllm:lora_requests_info max_lora label (0 when the instance serves no adapters) */
  maxLora: number;
  /** vllm:cache_config_info num_gpu_blocks, block_size; and max_num_seqs from config */
  numGpuBlocks: number;
  blockSize: number;
}

function adapters(reqs: Array<{ adapter: string }>): string[] {
  const s = new Set<string>();
  for (const r of reqs) if (r.adapter) s.add(r.adapter);
  return [...s];
}

export function scrape(e: LlmEngine): Scraped {
  const st = e.stats;
  return {
    numRequestsWaiting: e.waiting.length,
    numRequestsRunning: e.running.length,
    kvCacheUsagePerc: e.kvUsage(),
    promptTokensTotal: st.promptTokens,
    generationTokensTotal: st.generationTokens,
    prefixCacheQueriesTotal: st.prefixQueries,
    prefixCacheHitsTotal: st.prefixHits,
    requestSuccessTotal: st.finished,
    ttftSum: st.ttft.sum,
    ttftCount: st.ttft.count,
    queueTimeSum: st.queueTime.sum,
    queueTimeCount: st.queueTime.count,
    tpotSum: st.tpot.sum,
    tpotCount: st.tpot.count,
    inferenceTimeSum: st.inferenceTime.sum,
    inferenceTimeCount: st.inferenceTime.count,
    runningLoraAdapters: adapters(e.running),
    waitingLoraAdapters: adapters(e.waiting),
    maxLora: Object.keys(e.cfg.adapters).length ? e.cfg.maxLoras : 0,
    numGpuBlocks: e.cfg.numBlocks,
    blockSize: e.cfg.blockSize,
  };
}
