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

test('collector: a Triton whose model configuration is not served is measured as before (no slots), and the fetch is retried every modelsIntervalMs, not per scrape', async () => {
  const { InferenceCollector } = await import('../../agent/src/inference/collector');
  const { Registry } = await import('prom-client');
  const http = await import('node:http');
  let n = 0;
  const hits = new Map<string, number>();
  const srv = http.createServer((req, res) => {
    hits.set(req.url ?? '', (hits.get(req.url ?? '') ?? 0) + 1);
    if (req.url === '/metrics') {
      res.end(`nv_inference_request_success{model="m",version="1"} ${n}\nnv_inference_request_duration_us{model="m",version="1"} ${n * 100000}\nnv_inference_pending_request_count{model="m",version="1"} 1\n`);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const addr = `127.0.0.1:${(srv.address() as import('node:net').AddressInfo).port}`;
  let now = 1_000_000;
  const col = new InferenceCollector({ scrapeIntervalMs: 600_000, modelsIntervalMs: 30_000, services: [{ name: 't', kind: 'triton', instances: { static: [addr] } }] }, { registry: new Registry(), now: () => now });
  try {
    await col.start();
    await new Promise((r) => setTimeout(r, 200));
    for (let k = 0; k < 5; k++) {
      n += 10;
      now += 1000;
      await col.scrapeAll();
    }
    const d = col.details()[0];
    assert.equal(d.healthy, true);
    assert.ok(Math.abs(d.esMs - 100) < 1e-6, `E[S] ${d.esMs}`);
    assert.equal(d.triton?.slots, undefined);
    assert.match(d.tritonError ?? '', /\/v2\/models\/m\/config: HTTP 404/);
    assert.equal(hits.get('/v2/models/m/config'), 1, 'one attempt within modelsIntervalMs');
    now += 30_000;
    n += 10;
    await col.scrapeAll();
    assert.equal(hits.get('/v2/models/m/config'), 2, 'retried once the interval passed');
  } finally {
    await col.stop();
    await new Promise<void>((r) => srv.close(() => r()));
  }
});
