// Triton model configuration (GET /v2/models/<model>/config): slot counts from instance_group,
// ensembles recognised and their composing models left out of the sums.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseExposition } from '../../agent/src/inference/exposition';
import { extractSignals, resolveMappings } from '../../agent/src/inference/mappings';
import { modelsOnPage, parseTritonModelConfig, planTriton, withoutModels, type TritonModelConfig } from '../../agent/src/inference/triton';

const FIX = path.resolve(__dirname, '../fixtures/engines');
const cfg = (m: string): TritonModelConfig => parseTritonModelConfig(fs.readFileSync(path.join(FIX, 'triton-config', `${m}.json`), 'utf8'), m);

test('instance_group: count x GPUs listed for a GPU group, count for CPU, 1 without a group; ensembles have steps', () => {
  assert.deepEqual(cfg('bert'), { name: 'bert', ensemble: false, instances: 4, steps: [] });
  assert.deepEqual(cfg('tokenizer'), { name: 'tokenizer', ensemble: false, instances: 8, steps: [] });
  assert.deepEqual(cfg('text_pipeline'), { name: 'text_pipeline', ensemble: true, instances: 0, steps: ['tokenizer', 'bert'] });
  assert.equal(parseTritonModelConfig('{"name":"m","backend":"onnxruntime"}', 'm').instances, 1);
  assert.equal(parseTritonModelConfig('{"name":"m","instance_group":[{"kind":"KIND_GPU","gpus":[0]},{"count":3,"kind":"KIND_CPU"}]}', 'm').instances, 4, 'count defaults to 1; groups add up');
  assert.throws(() => parseTritonModelConfig('<html>', 'm'), /model config of "m": not JSON/);
  assert.throws(() => parseTritonModelConfig('{"instance_group":[{"count":-1}]}', 'm'), /instance_group\[0\]\.count: must be an integer >= 0/);
  assert.throws(() => parseTritonModelConfig('{"platform":"ensemble"}', 'm'), /ensemble_scheduling\.step: must be an array/);
  assert.throws(() => parseTritonModelConfig('{"platform":"ensemble","ensemble_scheduling":{"step":[{}]}}', 'm'), /step\[0\]\.model_name/);
});

test('plan: composing models excluded, the ensemble\'s slots its tightest step\'s; unknown configuration: no slots, nothing excluded', () => {
  const configs = new Map(['text_pipeline', 'tokenizer', 'bert'].map((m) => [m, cfg(m)]));
  const onPage = ['text_pipeline', 'tokenizer', 'bert'];
  const p = planTriton(onPage, configs, 'top-level');
  assert.deepEqual([...p.exclude].sort(), ['bert', 'tokenizer']);
  assert.equal(p.slots, 4);
  const all = planTriton(onPage, configs, 'all');
  assert.equal(all.exclude.size, 0);
  assert.equal(all.slots, 4 + 8 + 4, 'every model its own instances');
  assert.deepEqual(planTriton(onPage, new Map(), 'top-level'), { exclude: new Set(), slots: undefined });
  // a step without a configuration: the ensemble's slots are unknown, its steps still excluded
  const partial = new Map([['text_pipeline', cfg('text_pipeline')], ['tokenizer', cfg('tokenizer')]]);
  assert.equal(planTriton(onPage, partial, 'top-level').slots, undefined);
  // a cycle in a broken repository terminates
  const loop = new Map<string, TritonModelConfig>([['a', { name: 'a', ensemble: true, instances: 0, steps: ['b'] }], ['b', { name: 'b', ensemble: true, instances: 0, steps: ['a'] }]]);
  assert.equal(planTriton(['a'], loop, 'top-level').slots, undefined);
});

test('the ensemble page measured per top-level model: E[S] 250 ms, not 158 ms summed with its steps', () => {
  const m = resolveMappings('triton');
  const exp = parseExposition(fs.readFileSync(path.join(FIX, 'triton-ensemble.txt'), 'utf8'));
  assert.deepEqual(modelsOnPage(exp, m.completions), ['text_pipeline', 'tokenizer', 'bert']);
  const summed = extractSignals(exp, m);
  assert.equal(summed.completions, 3000);
  const plan = planTriton(['text_pipeline', 'tokenizer', 'bert'], new Map(['text_pipeline', 'tokenizer', 'bert'].map((x) => [x, cfg(x)])), 'top-level');
  const top = extractSignals(withoutModels(exp, plan.exclude), m);
  assert.equal(top.completions, 1000);
  assert.equal(top.serviceSumMs, 250_000, 'request 300 s - queue 50 s, in ms');
  assert.equal(top.queueSumMs, 50_000);
  assert.equal(top.waiting, undefined, 'no pending gauge on this page: queue unknown');
  assert.ok(Math.abs((top.gpuUtil ?? NaN) - 0.4) < 1e-12, 'GPU series carry no model label and are kept');
});
