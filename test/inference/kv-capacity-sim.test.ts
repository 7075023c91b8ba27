// The KV capacity the agent learns (running ÷ KV usage) against the LLM simulator's engine: what a
// few sequences say about the cache predicts how many run at once when the cache is the limit —
// the number at which vLLM starts to queue, far below its sequence cap (docs/inference-llm.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LlmEngine } from '../../sim/inference/llm/engine';
import { KvCapacity } from '../../agent/src/inference/kv-capacity';

const PROMPT = 480;
const OUT = 200;

function engine(): LlmEngine {
  // 512 blocks of 16 tokens; every request ≈ (480 + its decoded tokens) / 16 blocks; 64 sequences allowed
  return new LlmEngine({ numBlocks: 512, blockSize: 16, maxNumSeqs: 64, enablePrefixCaching: false });
}

const prompt = (k: number): number[] => Array.from({ length: PROMPT }, (_, j) => 1000 + k * PROMPT + j);

test('KV capacity learned at light load predicts how many sequences run at once when the engine queues', (t) => {
  // light load: 6 sequences decoding; scraped every 50 ms as the agent would
  const light = engine();
  for (let k = 0; k < 6; k++) light.submit({ model: light.cfg.models[0], promptTokens: prompt(k), maxTokens: OUT }, 0);
  const kv = new KvCapacity();
  for (let t = 50; t <= 1500; t += 50) {
    while (light.hasWork() && light.clockMs < t) light.step();
    if (light.running.length) kv.observe(light.running.length, light.kvUsage());
  }
  const learned = kv.value();
  assert.ok(Number.isFinite(learned), 'learned from the light phase');
  // heavy load: a backlog of 80 requests; how many run at once, on average, while others wait
  // (sequences grow as they decode, so the engine runs fewer at once than it admits at first)
  const heavy = engine();
  for (let k = 0; k < 80; k++) heavy.submit({ model: heavy.cfg.models[0], promptTokens: prompt(100 + k), maxTokens: OUT }, 0);
  let sum = 0, steps = 0;
  while (heavy.hasWork() && heavy.clockMs < 20_000) {
    heavy.step();
    if (heavy.waiting.length > 0 && heavy.clockMs > 1000) { sum += heavy.running.length; steps++; }
  }
  assert.ok(steps > 100, 'a backlog through the measured span');
  const atOnce = sum / steps;
  assert.ok(atOnce < 32, `KV-bound, far below the 64-sequence cap (${atOnce.toFixed(1)})`);
  const rel = learned / atOnce;
  t.diagnostic(`learned ${learned.toFixed(2)}, running at once while requests waited ${atOnce.toFixed(2)}`);
  assert.ok(rel >= 0.9 && rel <= 1.1, `learned ${learned.toFixed(1)} vs ${atOnce.toFixed(1)} running at once while requests waited`);
});
