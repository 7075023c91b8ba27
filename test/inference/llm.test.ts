// Agent-side LLM sources, one by one: vLLM's exposition (KV usage, token counters, TTFT / queue /
// inter-token histograms, the LoRA gauge), the /v1/models answer, the merged model list and its
// bounds, and the per-token term estimator (docs/inference-llm.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { parseExposition } from '../../agent/src/inference/exposition';
import { extractLlmSignals, fetchModels, llmSampleFilter, llmSeriesOf, LlmTermEstimator, loraInfo, modelList, parseModelsList, SGLANG_LLM_SERIES, VLLM_LLM_SERIES, type LlmSignals } from '../../agent/src/inference/llm';
import { MODEL_BASE, MODEL_LOADED, MODEL_WAITING } from '../../agent/src/snapshot/llm';

const fixture = (f: string) => fs.readFileSync(path.join(__dirname, 'fixtures', f), 'utf8');

test('vllm.txt: KV usage, token counters, TTFT and queue histograms (ms); the legacy gpu_cache_usage_perc name', () => {
  const s = extractLlmSignals(parseExposition(fixture('vllm.txt'), { keep: llmSampleFilter }));
  assert.equal(s.kvCacheUsage, 0.4375);
  assert.equal(s.promptTokens, 51234);
  assert.equal(s.generationTokens, 20480);
  assert.equal(s.ttft?.count, 100);
  assert.ok(s.ttft && s.ttft.sumMs > 0);
  assert.equal(s.queueTime?.count, 100);
  assert.equal(s.lora, undefined);
  const legacy = extractLlmSignals(parseExposition('# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name="a"} 0.25\nvllm:gpu_cache_usage_perc{model_name="b"} 0.75\n'));
  assert.equal(legacy.kvCacheUsage, 0.75, 'the fullest engine');
  const filtered = extractLlmSignals(parseExposition(fixture('vllm.txt')), { model_name: 'other' });
  assert.equal(filtered.promptTokens, undefined, 'service labels restrict the series');
});

test('lora_requests_info: the series with the latest timestamp value is the current state', () => {
  const exp = parseExposition([
    '# TYPE vllm:lora_requests_info gauge',
    'vllm:lora_requests_info{max_lora="2",running_lora_adapters="old",waiting_lora_adapters=""} 1.7e9',
    'vllm:lora_requests_info{max_lora="2",running_lora_adapters="sql-lora,chat-lora",waiting_lora_adapters="summ-lora"} 1.7000001e9',
    'vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.6e9',
  ].join('\n') + '\n');
  assert.deepEqual(loraInfo(exp), { running: ['sql-lora', 'chat-lora'], waiting: ['summ-lora'], maxLora: 2 });
  const noMax = parseExposition('vllm:lora_requests_info{running_lora_adapters="",waiting_lora_adapters=""} 1\n');
  assert.deepEqual(loraInfo(noMax), { running: [], waiting: [], maxLora: NaN });
});

test('/v1/models: base models and adapters (parent set); bad answers name the field', () => {
  const body = JSON.stringify({ object: 'list', data: [{ id: 'llama', parent: null }, { id: 'sql-lora', parent: 'llama' }, { id: 'llama-2' }] });
  assert.deepEqual(parseModelsList(body), { base: ['llama', 'llama-2'], adapters: ['sql-lora'] });
  const huge = JSON.stringify({ data: Array.from({ length: 5000 }, (_, i) => ({ id: `m${i}` })) });
  assert.equal(parseModelsList(huge).base.length, 1024, 'bounded: later entries ignored');
  assert.throws(() => parseModelsList('<html>'), /\/v1\/models: not JSON/);
  assert.throws(() => parseModelsList('{"data": {}}'), /data: must be an array/);
  assert.throws(() => parseModelsList('{"data": [{"id": ""}]}'), /data\[0\]\.id: must be a non-empty string/);
});

test('fetchModels: bounded (timeout, body size) and reports HTTP errors', async () => {
  let mode = 'ok';
  const srv = http.createServer((req, res) => {
    if (mode === 'ok') res.end(JSON.stringify({ data: [{ id: 'm' }] }));
    else if (mode === '500') res.writeHead(500).end('x');
    else if (mode === 'big') res.end('x'.repeat(2 * 1024 * 1024));
    // 'hang': never answers
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const addr = `127.0.0.1:${(srv.address() as AddressInfo).port}`;
  try {
    assert.deepEqual(await fetchModels(addr, '/v1/models', 'http', 1000), { base: ['m'], adapters: [] });
    mode = '500';
    await assert.rejects(fetchModels(addr, '/v1/models', 'http', 1000), /\/v1\/models: HTTP 500/);
    mode = 'big';
    await assert.rejects(fetchModels(addr, '/v1/models', 'http', 1000), /body larger than 1048576 bytes/);
    mode = 'hang';
    const t0 = Date.now();
    await assert.rejects(fetchModels(addr, '/v1/models', 'http', 100), /timeout after 100 ms/);
    assert.ok(Date.now() - t0 < 1000);
  } finally {
    srv.closeAllConnections();
    srv.close();
  }
});

test('modelList: config, /v1/models and the LoRA gauge merged with flags; loaded first; bounded to 64; over-long names dropped', () => {
  const { models, dropped } = modelList(['llama'], { base: ['llama'], adapters: ['a', 'b', 'idle'] }, { running: ['b'], waiting: ['a', 'c'], maxLora: 2 });
  assert.deepEqual(models, [
    { name: 'b', flags: MODEL_LOADED },
    { name: 'a', flags: MODEL_WAITING },
    { name: 'c', flags: MODEL_WAITING },
    { name: 'llama', flags: MODEL_BASE },
    { name: 'idle', flags: 0 },
  ]);
  assert.equal(dropped, 0);
  const many = Array.from({ length: 70 }, (_, i) => `m${String(i).padStart(2, '0')}`);
  const big = modelList([], { base: [], adapters: many }, { running: ['m69'], waiting: [], maxLora: 1 });
  assert.equal(big.models.length, 64);
  assert.equal(big.models[0].name, 'm69', 'a loaded adapter survives the bound');
  assert.equal(big.dropped, 6);
  const long = modelList(['é'.repeat(128)], undefined, undefined);
  assert.deepEqual(long, { models: [], dropped: 1 });
});

/** cumulative vLLM-style counters after n requests of P prompt tokens, prefill time f ms, queue q ms, d ms per output token over G tokens */
function cum(n: number, P: number, f: number, q: number, d: number, G: number, withPrefillHist = false): LlmSignals {
  return {
    promptTokens: n * P,
    generationTokens: n * G,
    ttft: { sumMs: n * (q + f), count: n },
    queueTime: { sumMs: n * q, count: n },
    itl: { sumMs: n * (G - 1) * d, count: n * (G - 1) },
    ...(withPrefillHist ? { prefillTime: { sumMs: n * f, count: n } } : {}),
  };
}

test('term estimator: prefill = (TTFT − queue) per request / prompt tokens per request; decode = mean inter-token latency', () => {
  const e = new LlmTermEstimator({ windowS: 10 });
  let t = 0;
  let r = e.observe(t, cum(0, 512, 46.96, 30, 6.25, 20));
  assert.ok(Number.isNaN(r.prefillMsPerToken) && Number.isNaN(r.decodeMsPerToken), 'no interval yet: unknown');
  for (let n = 10; n <= 50; n += 10) r = e.observe((t += 1000), cum(n, 512, 46.96, 30, 6.25, 20));
  assert.ok(Math.abs(r.prefillMsPerToken - 46.96 / 512) < 1e-9, String(r.prefillMsPerToken));
  assert.ok(Math.abs(r.decodeMsPerToken - 6.25) < 1e-9);
  assert.equal(r.prefillSource, 'ttft-minus-queue');
  // idle: the last terms are kept
  r = e.observe((t += 1000), cum(50, 512, 46.96, 30, 6.25, 20));
  r = e.observe((t += 60_000), cum(50, 512, 46.96, 30, 6.25, 20));
  assert.ok(Math.abs(r.decodeMsPerToken - 6.25) < 1e-9);
  // a restart (counters down) re-bases: the new instance's costs take over
  r = e.observe((t += 1000), cum(5, 100, 20, 0, 10, 11));
  r = e.observe((t += 1000), cum(45, 100, 20, 0, 10, 11));
  assert.ok(Math.abs(r.prefillMsPerToken - 0.2) < 1e-9, String(r.prefillMsPerToken));
  assert.ok(Math.abs(r.decodeMsPerToken - 10) < 1e-9);
});

test('term estimator: vLLM\'s prefill-time histogram is preferred over TTFT − queue', () => {
  const e = new LlmTermEstimator();
  e.observe(0, cum(0, 100, 10, 50, 5, 4, true));
  // TTFT − queue would say 10 ms; the prefill histogram says 12 ms (e.g. TTFT measured at the API server)
  const s = cum(30, 100, 10, 50, 5, 4, true);
  s.prefillTime = { sumMs: 30 * 12, count: 30 };
  const r = e.observe(1000, s);
  assert.equal(r.prefillSource, 'prefill-histogram');
  assert.ok(Math.abs(r.prefillMsPerToken - 0.12) < 1e-9);
});

test('term estimator: prefill is priced per computed prompt token — cached tokens (prefix-cache counters) are left out', () => {
  // 40 requests of 1000 prompt tokens, 750 of them cached: 20 ms of prefill each = 0.08 ms per computed token
  const warm = (n: number, withCounters: boolean): LlmSignals => ({
    ...cum(n, 1000, 20, 5, 5, 4),
    ...(withCounters ? { prefixQueries: n * 1000, prefixHits: n * 750 } : {}),
  });
  const e = new LlmTermEstimator();
  e.observe(0, warm(0, true));
  const r = e.observe(1000, warm(40, true));
  assert.ok(Math.abs(r.prefillMsPerToken - 20 / 250) < 1e-9, String(r.prefillMsPerToken));
  assert.equal(r.prefillTokens, 'prefix-counters');
  assert.ok(Math.abs(r.cachedShare - 0.75) < 1e-12);
  // a cold instance computing all 1000 tokens in 80 ms has the same per-token cost: the cache no longer makes the warm one look 4× faster
  const c = new LlmTermEstimator();
  c.observe(0, { ...cum(0, 1000, 80, 5, 5, 4), prefixQueries: 0, prefixHits: 0 });
  const rc = c.observe(1000, { ...cum(40, 1000, 80, 5, 5, 4), prefixQueries: 40_000, prefixHits: 0 });
  assert.ok(Math.abs(rc.prefillMsPerToken - r.prefillMsPerToken) < 1e-9);
  // without any prefix-cache metric: every prompt token counts (documented fallback, right with caching off)
  const f = new LlmTermEstimator();
  f.observe(0, warm(0, false));
  const rf = f.observe(1000, warm(40, false));
  assert.ok(Math.abs(rf.prefillMsPerToken - 20 / 1000) < 1e-9, String(rf.prefillMsPerToken));
  assert.equal(rf.prefillTokens, 'all-prompt');
  assert.equal(rf.cachedShare, 0);
});

test('term estimator: V0\'s hit-rate gauge is the fallback; a fully cached window still divides by ≥ 1 computed token per request', () => {
  const e = new LlmTermEstimator();
  e.observe(0, { ...cum(0, 1000, 20, 5, 5, 4), prefixHitRate: 0.5 });
  const r = e.observe(1000, { ...cum(40, 1000, 20, 5, 5, 4), prefixHitRate: 0.5 });
  assert.ok(Math.abs(r.prefillMsPerToken - 20 / 500) < 1e-9, String(r.prefillMsPerToken));
  assert.equal(r.prefillTokens, 'hit-rate-gauge');
  // hits == queries (every token cached: impossible in vLLM, the last token is computed): finite, per 1 token
  const all = new LlmTermEstimator();
  all.observe(0, { ...cum(0, 64, 3, 1, 5, 4), prefixQueries: 0, prefixHits: 0 });
  const ra = all.observe(1000, { ...cum(10, 64, 3, 1, 5, 4), prefixQueries: 640, prefixHits: 640 });
  assert.ok(Math.abs(ra.prefillMsPerToken - 3) < 1e-9, String(ra.prefillMsPerToken));
});

test('LLM signals: V1 prefix-cache counters (and the early gpu_ spelling), V0 hit-rate gauge, label-restricted', () => {
  const text = [
    'vllm:prefix_cache_queries_total{model_name="a"} 1000',
    'vllm:prefix_cache_hits_total{model_name="a"} 600',
    'vllm:prefix_cache_queries_total{model_name="b"} 5',
    'vllm:prefix_cache_hits_total{model_name="b"} 1',
    'vllm:gpu_prefix_cache_queries_total{model_name="a"} 7',
    'vllm:gpu_prefix_cache_hits_total{model_name="a"} 7',
    '',
  ].join('\n');
  const s = extractLlmSignals(parseExposition(text, { keep: llmSampleFilter }), { model_name: 'a' });
  assert.equal(s.prefixQueries, 1000);
  assert.equal(s.prefixHits, 600);
  const early = extractLlmSignals(parseExposition('vllm:gpu_prefix_cache_queries_total 70\nvllm:gpu_prefix_cache_hits_total 7\n', { keep: llmSampleFilter }));
  assert.deepEqual([early.prefixQueries, early.prefixHits], [70, 7]);
  const v0 = extractLlmSignals(parseExposition('vllm:gpu_prefix_cache_hit_rate 0.25\n', { keep: llmSampleFilter }));
  assert.equal(v0.prefixHitRate, 0.25);
  assert.equal(v0.prefixQueries, undefined);
  const bad = extractLlmSignals(parseExposition('vllm:gpu_prefix_cache_hit_rate 7\n', { keep: llmSampleFilter }));
  assert.equal(bad.prefixHitRate, undefined, 'a rate outside [0, 1] is not used');
});

test('cold start: no own E[S] -> the service median (esSource service-median), none anywhere -> the prior (esSource prior)', async () => {
  const { buildInstanceRecord } = await import('../../agent/src/inference/collector');
  const base = { service: 'llm', addr: '10.0.0.1:80', peer: '', reason: 'ok' as const, state: undefined, baselineMs: NaN, lastOkAt: 0, now: 10, concurrency: 4 };
  const prior = () => ({ es: 1000, es2: 2e6 });
  const fresh = buildInstanceRecord({ ...base, imputed: () => ({ es: NaN, es2: NaN }), prior }).record;
  assert.equal(fresh.esSource, 'prior');
  assert.equal(fresh.esMs, 1000);
  assert.equal(fresh.es2Ms2, 2e6);
  const median = buildInstanceRecord({ ...base, imputed: () => ({ es: 40, es2: 3000 }), prior }).record;
  assert.equal(median.esSource, 'service-median');
  assert.equal(median.esMs, 40);
  const none = buildInstanceRecord({ ...base, imputed: () => ({ es: NaN, es2: NaN }) }).record;
  assert.equal(none.esSource, 'measured');
  assert.ok(Number.isNaN(none.esMs), 'without a prior E[S] stays unknown');
});

test('config: LLM fields have their shipped defaults; bad values name the field', async () => {
  const { resolveInferenceConfig } = await import('../../agent/src/inference/schema');
  const cfg = resolveInferenceConfig({ services: [{ name: 'llm', kind: 'vllm', instances: { static: ['10.0.0.1:80'] } }] });
  assert.equal(cfg.modelsIntervalMs, 30000);
  assert.equal(cfg.modelsTimeoutMs, 2000);
  assert.equal(cfg.services[0].priorServiceMs, 1000);
  assert.equal(cfg.services[0].modelsPath, '/v1/models');
  assert.throws(() => resolveInferenceConfig({ services: [{ name: 'llm', kind: 'vllm', instances: { static: ['10.0.0.1:80'] }, models: [''] }] }), /inference\.services\[0\]\.models\[0\]/);
  assert.throws(() => resolveInferenceConfig({ services: [{ name: 'llm', kind: 'vllm', instances: { static: ['10.0.0.1:80'] }, priorServiceMs: 0 }] }), /inference\.services\[0\]\.priorServiceMs/);
  assert.throws(() => resolveInferenceConfig({ modelsIntervalMs: 10, services: [] }), /inference\.modelsIntervalMs/);
});

test('SGLang LLM names: tokens, TTFT, queue time, ITL, token_usage, cached tokens against prompt tokens, the hit-rate gauge as fallback', () => {
  const page = fs.readFileSync(path.resolve(__dirname, '../fixtures/engines/sglang.txt'), 'utf8');
  const s = extractLlmSignals(parseExposition(page, { keep: llmSampleFilter }), undefined, SGLANG_LLM_SERIES);
  assert.equal(s.promptTokens, 300000);
  assert.equal(s.generationTokens, 40300);
  assert.deepEqual(s.ttft, { sumMs: 45000, count: 300 });
  assert.deepEqual(s.queueTime, { sumMs: 15000, count: 300 });
  assert.deepEqual(s.itl, { sumMs: 600000, count: 40000 });
  assert.equal(s.kvCacheUsage, 0.3);
  assert.equal(s.prefixQueries, 300000);
  assert.equal(s.prefixHits, 100000);
  assert.equal(s.prefixHitRate, 0.3);
  assert.equal(s.prefillTime, undefined);
  // the same page read with vLLM's names finds nothing: the kind selects the names
  assert.equal(extractLlmSignals(parseExposition(page), undefined, VLLM_LLM_SERIES).promptTokens, undefined);
  assert.equal(llmSeriesOf('sglang'), SGLANG_LLM_SERIES);
  assert.equal(llmSeriesOf('vllm'), VLLM_LLM_SERIES);
  // before any cached hit SGLang has no cached_tokens_total series: the gauge is the share
  const early = extractLlmSignals(parseExposition('sglang:prompt_tokens_total 10\nsglang:cache_hit_rate 0.25\n'), undefined, SGLANG_LLM_SERIES);
  assert.equal(early.prefixQueries, undefined);
  assert.equal(early.prefixHitRate, 0.25);
});
