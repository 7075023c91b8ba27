// The prefill term against the LLM simulator's engine (virtual time) with prefix caching on:
// vLLM's prompt_tokens_total counts cached tokens, so the term must be priced per computed
// token, or an instance serving cached prefixes looks several times faster per token than a
// cold one with the same hardware and new prompt families pile onto it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseExposition } from '../../agent/src/inference/exposition';
import { extractLlmSignals, llmSampleFilter, LlmTermEstimator, type LlmTerms } from '../../agent/src/inference/llm';
import { LlmEngine } from '../../sim/inference/llm/engine';
import { renderLlmVllm } from '../../sim/inference/llm/render';
import { advanceTo } from '../../sim/inference/llm/virtual';
import { tokenize } from '../../sim/inference/llm/tokens';
import { randomText } from '../../sim/inference/llm/workloads';
import { mulberry32 } from '../../sim/inference/prng';

const rng = mulberry32(11);

/** n sequential requests (no queueing), each prompt = prefix + a fresh 64-token suffix; the terms learned from two scrapes */
function learn(prefix: number[] | null, n: number, strip: (text: string) => string = (t) => t): LlmTerms {
  const e = new LlmEngine({});
  const est = new LlmTermEstimator({ windowS: 600 });
  const scrape = (t: number): LlmTerms => est.observe(t, extractLlmSignals(parseExposition(strip(renderLlmVllm({ engine: e, modelName: 'sim-llm', nowS: t / 1000 })), { keep: llmSampleFilter })));
  scrape(0);
  for (let i = 0; i < n; i++) {
    const own = tokenize(randomText(rng, prefix ? 64 : 1088));
    advanceTo(e, i * 1000);
    e.submit({ model: 'sim-llm', promptTokens: prefix ? [...prefix, ...own] : own, maxTokens: 2 }, i * 1000);
  }
  advanceTo(e, n * 1000);
  return scrape(n * 1000);
}

test('prefill term with prefix caching: a warm instance is not cheaper per token than a cold one (prefix-cache counters)', () => {
  const shared = tokenize(randomText(rng, 1024));
  const warm = learn(shared, 30);
  const cold = learn(null, 30);
  assert.equal(warm.prefillTokens, 'prefix-counters');
  assert.ok(warm.cachedShare > 0.85, `cached share ${warm.cachedShare}`);
  assert.ok(cold.cachedShare < 0.01, `cold cached share ${cold.cachedShare}`);
  // same engine costs: per computed token the warm instance pays the step overhead over fewer tokens, never less than the cold one
  assert.ok(warm.prefillMsPerToken >= cold.prefillMsPerToken * 0.99, `warm ${warm.prefillMsPerToken} vs cold ${cold.prefillMsPerToken}`);
  // the defect this guards against: without the counters the warm instance looks several times faster
  const noCounters = learn(shared, 30, (t) => t.split('\n').filter((l) => !l.includes('prefix_cache')).join('\n'));
  assert.equal(noCounters.prefillTokens, 'all-prompt');
  assert.ok(noCounters.prefillMsPerToken < cold.prefillMsPerToken / 3, `fallback ${noCounters.prefillMsPerToken} vs cold ${cold.prefillMsPerToken}`);
});
