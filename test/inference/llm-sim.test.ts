// The per-token terms against the LLM simulator (sim/inference-server.ts --mode llm, a process):
// the engine's step costs are configured, so the terms the estimator learns from its vLLM
// metrics can be checked against them (docs/inference-llm.md, "Accuracy"). Also the model list
// (/v1/models) and the LoRA gauge from the live simulator.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseExposition } from '../../agent/src/inference/exposition';
import { extractLlmSignals, fetchModels, llmSampleFilter, LlmTermEstimator, modelList } from '../../agent/src/inference/llm';
import { MODEL_BASE, MODEL_LOADED } from '../../agent/src/snapshot/llm';
import { complete, startLlmSim, type SimTiming } from './llm-sim-helpers';

const STEP_MS = 6;
const PREFILL_MS = 0.08;
const DECODE_MS_PER_SEQ = 0.25;
const COSTS = ['--step-ms', String(STEP_MS), '--prefill-ms-per-token', String(PREFILL_MS), '--decode-ms-per-seq', String(DECODE_MS_PER_SEQ), '--prefix-caching', 'false'];

async function scrape(url: string) {
  const text = await (await fetch(`${url}/metrics`)).text();
  return extractLlmSignals(parseExposition(text, { keep: llmSampleFilter }));
}

test('learned terms match the simulator (sequential requests): prefill = the configured step cost, decode = what each request saw', async (t) => {
  const sim = await startLlmSim(COSTS);
  try {
    let salt = 0;
    for (const P of [128, 1024]) {
      const G = 12;
      const est = new LlmTermEstimator({ windowS: 60 });
      est.observe(Date.now(), await scrape(sim.url));
      const seen: SimTiming[] = [];
      for (let i = 0; i < 6; i++) seen.push(await complete(sim.url, 'sim-llm', P, G, ++salt));
      const r = est.observe(Date.now(), await scrape(sim.url));
      // a P-token prompt is one engine step (P <= the 2048-token budget): step + P x prefill
      const wantPrefill = (STEP_MS + PREFILL_MS * P) / P;
      // decode: a batch-1 step costs STEP_MS + DECODE_MS_PER_SEQ; the real-time driver starts each
      // step when its timer fires, so the wall-clock gap per token is that plus the timer's
      // lateness. The truth is what the requests saw (their own e2e − TTFT over G − 1 tokens).
      const engineDecode = STEP_MS + DECODE_MS_PER_SEQ;
      const seenDecode = seen.reduce((a, s) => a + (s.e2eMs - s.ttftMs), 0) / (seen.length * (G - 1));
      const seenPrefill = seen.reduce((a, s) => a + (s.ttftMs - s.queuedMs), 0) / (seen.length * P);
      t.diagnostic(`P=${P}: prefill ${r.prefillMsPerToken.toFixed(5)} ms/token (engine ${wantPrefill.toFixed(5)}, requests saw ${seenPrefill.toFixed(5)}, marginal ${PREFILL_MS}); ` +
        `decode ${r.decodeMsPerToken.toFixed(4)} ms/token (requests saw ${seenDecode.toFixed(4)}, engine step ${engineDecode})`);
      assert.ok(Math.abs(r.prefillMsPerToken / wantPrefill - 1) < 0.02, `P=${P} prefill ${r.prefillMsPerToken} vs ${wantPrefill}`);
      assert.ok(Math.abs(r.decodeMsPerToken / seenDecode - 1) < 0.02, `P=${P} decode ${r.decodeMsPerToken} vs ${seenDecode}`);
      assert.ok(r.decodeMsPerToken >= engineDecode * 0.99, `P=${P} decode ${r.decodeMsPerToken} below the engine's step cost`);
      assert.equal(r.prefillRequests, 6);
      assert.equal(r.decodeTokens, 6 * (G - 1));
    }
  } finally {
    await sim.stop();
  }
});

test('under continuous batching the terms are the costs requests see (co-scheduled work included), bounded by the engine', async (t) => {
  const sim = await startLlmSim(COSTS);
  try {
    const P = 512;
    const C = 4;
    const est = new LlmTermEstimator({ windowS: 60 });
    est.observe(Date.now(), await scrape(sim.url));
    const G = 24;
    const seen: SimTiming[] = [];
    await Promise.all(Array.from({ length: C }, async (_, c) => {
      for (let i = 0; i < 5; i++) seen.push(await complete(sim.url, 'sim-llm', P, G, 1000 + c * 10 + i));
    }));
    const r = est.observe(Date.now(), await scrape(sim.url));
    const seenPrefill = seen.reduce((a, s) => a + (s.ttftMs - s.queuedMs), 0) / (seen.length * P);
    const seenDecode = seen.reduce((a, s) => a + (s.e2eMs - s.ttftMs), 0) / (seen.length * (G - 1));
    t.diagnostic(`C=${C} P=${P}: requests saw prefill ${seenPrefill.toFixed(5)}, decode ${seenDecode.toFixed(3)}`);
    assert.ok(Math.abs(r.prefillMsPerToken / seenPrefill - 1) < 0.02, `prefill ${r.prefillMsPerToken} vs ${seenPrefill}`);
    assert.ok(Math.abs(r.decodeMsPerToken / seenDecode - 1) < 0.02, `decode ${r.decodeMsPerToken} vs ${seenDecode}`);
    const lowPrefill = (STEP_MS + PREFILL_MS * P) / P;
    // worst case: a step holds all C prefills (within the 2048 budget) and the other sequences' decodes
    const highPrefill = (STEP_MS + PREFILL_MS * P * C + DECODE_MS_PER_SEQ * C) / P;
    const lowDecode = STEP_MS + DECODE_MS_PER_SEQ;
    const highDecode = STEP_MS + DECODE_MS_PER_SEQ * C + PREFILL_MS * P * (C - 1);
    t.diagnostic(`C=${C} P=${P}: prefill ${r.prefillMsPerToken.toFixed(5)} in [${lowPrefill.toFixed(5)}, ${highPrefill.toFixed(5)}]; decode ${r.decodeMsPerToken.toFixed(3)} in [${lowDecode}, ${highDecode}]`);
    assert.ok(r.prefillMsPerToken >= lowPrefill * 0.99 && r.prefillMsPerToken <= highPrefill, String(r.prefillMsPerToken));
    assert.ok(r.decodeMsPerToken >= lowDecode * 0.99 && r.decodeMsPerToken <= highDecode, String(r.decodeMsPerToken));
  } finally {
    await sim.stop();
  }
});

test('live simulator: /v1/models lists base model and adapters; the LoRA gauge shows the running adapter and max_lora', async () => {
  const sim = await startLlmSim([...COSTS, '--model-name', 'llama-3-8b', '--adapters', 'sql-lora:llama-3-8b,chat-lora:llama-3-8b', '--max-loras', '1']);
  try {
    const served = await fetchModels(sim.addr, '/v1/models', 'http', 2000);
    assert.deepEqual(served, { base: ['llama-3-8b'], adapters: ['sql-lora', 'chat-lora'] });
    const long = complete(sim.url, 'sql-lora', 64, 150, 7); // ~1 s of decoding
    await new Promise((r) => setTimeout(r, 250));
    const s = await scrape(sim.url);
    await long;
    assert.deepEqual(s.lora, { running: ['sql-lora'], waiting: [], maxLora: 1 });
    assert.ok(s.kvCacheUsage !== undefined && s.kvCacheUsage > 0 && s.kvCacheUsage < 1);
    const { models } = modelList([], served, s.lora);
    assert.deepEqual(models, [{ name: 'sql-lora', flags: MODEL_LOADED }, { name: 'llama-3-8b', flags: MODEL_BASE }, { name: 'chat-lora', flags: 0 }]);
  } finally {
    await sim.stop();
  }
});
