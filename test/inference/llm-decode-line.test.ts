// The decode line (issue 20 §3): time per output token against the running batch, learned from a
// server's inter-token latency and running gauge (agent/src/inference/llm.ts fitDecodeLine,
// LlmTermEstimator), checked on the simulator's memory-bound engine (step 10.8 + 0.2 · n ms).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { extractLlmSignals, fitDecodeLine, LlmTermEstimator } from '../../agent/src/inference/llm';
import { parseExposition } from '../../agent/src/inference/exposition';
import { LlmEngine } from '../../sim/inference/llm/engine';
import { renderLlmVllm } from '../../sim/inference/llm/render';
import { advanceTo } from '../../sim/inference/llm/virtual';
import { tokenize } from '../../sim/inference/llm/tokens';
import { A100_LLAMA8B, MODEL } from '../../bench/llm-routing/published';
import { decodeSnapshot, encodeSnapshot, HEADER, HEADER_LENGTH } from '../../agent/src/snapshot/codec';
import { MODEL_BASE, SECTION_LLM_DECODE, type InstanceLlmRecord } from '../../agent/src/snapshot/llm';

test('fitDecodeLine: weighted least squares, unknown without spread, slope and intercept never negative', () => {
  const pts = [1, 8, 16, 32].map((n) => ({ running: n, itlMs: 10 + 0.25 * n, weight: 100 }));
  const f = fitDecodeLine(pts);
  assert.ok(Math.abs(f.idleMs - 10) < 1e-9 && Math.abs(f.perSeqMs - 0.25) < 1e-9);
  // the same batch everywhere: slope and intercept cannot be told apart
  assert.ok(Number.isNaN(fitDecodeLine([4, 4, 4, 4].map((n) => ({ running: n, itlMs: 12, weight: 10 }))).idleMs));
  // too few intervals
  assert.ok(Number.isNaN(fitDecodeLine(pts.slice(0, 3)).perSeqMs));
  // a falling line (noise, prefill stalls at low batch) is not a cheaper step: slope 0
  const down = fitDecodeLine([1, 8, 16, 32].map((n) => ({ running: n, itlMs: 20 - 0.1 * n, weight: 10 })));
  assert.equal(down.perSeqMs, 0);
  // a negative intercept refits through the origin
  const steep = fitDecodeLine([10, 20, 30, 40].map((n) => ({ running: n, itlMs: -5 + 1 * n, weight: 10 })));
  assert.equal(steep.idleMs, 0);
  assert.ok(steep.perSeqMs > 0);
  // non-finite points and zero weights are left out
  assert.ok(Number.isFinite(fitDecodeLine([...pts, { running: NaN, itlMs: 5, weight: 10 }, { running: 3, itlMs: 1e9, weight: 0 }]).idleMs));
});

test('LlmTermEstimator learns the simulator\'s decode line from /metrics (ITL against num_requests_running)', () => {
  const e = new LlmEngine(A100_LLAMA8B);
  const est = new LlmTermEstimator({ windowS: 120 });
  let t = 0;
  let id = 0;
  let terms = est.current();
  assert.ok(Number.isNaN(terms.decodeIdleMs) && Number.isNaN(terms.decodeMsPerSeq));
  // the batch grows by 4 long decoding requests every 4 s: 4, 8, ..., 40
  for (let stage = 0; stage < 10; stage++) {
    for (let k = 0; k < 4; k++) e.submit({ model: MODEL, promptTokens: tokenize(`req ${id++} `.padEnd(64, 'x')), maxTokens: 4000 }, t);
    for (let s = 0; s < 4; s++) {
      t += 1000;
      advanceTo(e, t);
      terms = est.observe(t, extractLlmSignals(parseExposition(renderLlmVllm({ engine: e, modelName: MODEL, nowS: t / 1000 }))));
    }
  }
  assert.ok(Math.abs(terms.decodeIdleMs - 10.8) < 1, `intercept ${terms.decodeIdleMs} ms`);
  assert.ok(Math.abs(terms.decodeMsPerSeq - 0.2) < 0.04, `slope ${terms.decodeMsPerSeq} ms per sequence`);
  // the step at batch 1 and 32 as the published A100 figures (~11 and ~17 ms)
  assert.ok(Math.abs(terms.decodeIdleMs + terms.decodeMsPerSeq - 11) < 1);
  assert.ok(Math.abs(terms.decodeIdleMs + 32 * terms.decodeMsPerSeq - 17.2) < 1.5);
});

test('the decode line rides in section type 5: written only when known, merged back by service and address, out of range unknown', () => {
  const rec = (addr: string, idle?: number, per?: number): InstanceLlmRecord => ({
    service: 'llm', addr, prefillMsPerToken: 0.1, decodeMsPerToken: 17, kvCacheUsage: 0.2, kvSeqs: NaN, maxLoras: 0, models: [{ name: 'm', flags: MODEL_BASE }],
    ...(idle !== undefined ? { decodeIdleMs: idle, decodeMsPerSeq: per } : {}),
  });
  const types = (b: Buffer): number[] => {
    const out: number[] = [];
    let pos = HEADER_LENGTH;
    const count = b.readUInt16LE(HEADER.sectionCount);
    for (let i = 0; i < count; i++) { out.push(b.readUInt16LE(pos)); pos += 8 + b.readUInt32LE(pos + 4); }
    return out;
  };
  const none = encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [rec('10.0.0.1:80'), rec('10.0.0.2:80', NaN, NaN)] });
  assert.ok(!types(none).includes(SECTION_LLM_DECODE));
  const doc = encodeSnapshot({ seq: 2, generatedAtMs: 2, peers: [], llm: [rec('10.0.0.1:80', 10.8, 0.2), rec('10.0.0.2:80', -1, 0.2), rec('10.0.0.3:80')] });
  assert.ok(types(doc).includes(SECTION_LLM_DECODE));
  const back = decodeSnapshot(doc).llm ?? [];
  assert.ok(Math.abs((back[0].decodeIdleMs as number) - 10.8) < 1e-5 && Math.abs((back[0].decodeMsPerSeq as number) - 0.2) < 1e-6);
  assert.equal(back[1].decodeIdleMs, undefined, 'a negative intercept is not published');
  assert.equal(back[2].decodeIdleMs, undefined);
});
