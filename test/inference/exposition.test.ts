import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ExpositionParseError, histogramSeries, parseExposition } from '../../agent/src/inference/exposition';
import { extractSignals, hasLoadSignal, resolveMappings } from '../../agent/src/inference/mappings';

const fx = (name: string): string => fs.readFileSync(path.join(__dirname, 'fixtures', name), 'utf8');
const close = (a: number | undefined, b: number, eps = 1e-9): void => assert.ok(a !== undefined && Math.abs(a - b) <= eps * Math.max(1, Math.abs(b)), `${a} != ${b}`);

test('vLLM (V1) exposition: gauges, success counter over finished_reason, histograms with le in the middle of the labels', () => {
  const exp = parseExposition(fx('vllm.txt'));
  assert.equal(exp.types.get('vllm:e2e_request_latency_seconds'), 'histogram');
  const e2e = histogramSeries(exp, 'vllm:e2e_request_latency_seconds');
  assert.equal(e2e.length, 1);
  assert.deepEqual(e2e[0].labels, { engine: '0', model_name: 'meta-llama/Llama-3.1-8B-Instruct' });
  assert.equal(e2e[0].bounds.length, 21);
  assert.equal(e2e[0].count, 100);
  assert.equal(e2e[0].sum, 62.5);
  const s = extractSignals(exp, resolveMappings('vllm'));
  assert.equal(s.waiting, 2);
  assert.equal(s.running, 3);
  assert.equal(s.kvCacheUsage, 0.4375);
  assert.equal(s.completions, 100); // 0 abort + 3 length + 97 stop
  // service time = RUNNING-phase histogram, preferred over e2e
  assert.equal(s.serviceHist?.count, 100);
  close(s.serviceHist?.sumMs, 45000);
  assert.equal(s.serviceHist?.boundsMs[0], 300);
  assert.deepEqual(s.serviceHist?.cumulative.slice(0, 7), [30, 70, 90, 96, 99, 100, 100]);
  close(s.latencyHist?.sumMs, 62500);
  assert.equal(s.gpuUtil, undefined);
  assert.ok(hasLoadSignal(s));
});

test('legacy vLLM: gpu_cache_usage_perc and e2e as the service histogram', () => {
  const s = extractSignals(parseExposition(fx('vllm-legacy.txt')), resolveMappings('vllm'));
  assert.equal(s.kvCacheUsage, 0.125);
  assert.equal(s.running, 1);
  assert.equal(s.waiting, 0);
  assert.ok(s.matched.includes('vllm:e2e_request_latency_seconds'));
  close(s.serviceHist?.sumMs, 3100);
  assert.equal(s.serviceHist?.count, 10);
  assert.equal(s.completions, undefined);
});

test('Triton exposition: counters summed over models, service = duration - queue, GPU util averaged', () => {
  const s = extractSignals(parseExposition(fx('triton.txt')), resolveMappings('triton'));
  assert.equal(s.completions, 1500);
  // (30e6 + 15e6) - (6e6 + 3e6) us = 36e6 us = 36000 ms
  close(s.serviceSumMs, 36000);
  assert.equal(s.waiting, 5);
  assert.equal(s.running, undefined);
  close(s.gpuUtil, 0.5);
  assert.equal(s.serviceHist, undefined);
});

test('TGI exposition: unlabelled series, 1.5x bucket ladder, inference-duration as service time', () => {
  const exp = parseExposition(fx('tgi.txt'));
  const s = extractSignals(exp, resolveMappings('tgi'));
  assert.equal(s.waiting, 3);
  assert.equal(s.running, 4);
  assert.equal(s.completions, 128);
  assert.equal(s.serviceHist?.boundsMs.length, 35);
  close(s.serviceHist?.boundsMs[0], 0.15);
  close(s.serviceHist?.sumMs, 24320);
  close(s.latencyHist?.sumMs, 25600);
  assert.equal(s.latencyHist?.count, 128);
});

test('DCGM exporter page (read for a paired gpu exporter): utilisation % -> 0..1 averaged over GPUs', () => {
  const s = extractSignals(parseExposition(fx('dcgm.txt')), resolveMappings('custom'));
  close(s.gpuUtil, 0.75);
  assert.ok(hasLoadSignal(s));
  // label filter: only GPU 1
  const one = extractSignals(parseExposition(fx('dcgm.txt')), resolveMappings('custom'), { gpu: '1' });
  close(one.gpuUtil, 0.6);
});

test('custom mappings take precedence and carry units', () => {
  const text = [
    '# TYPE my_queue gauge',
    'my_queue 7',
    '# TYPE my_latency_ms histogram',
    'my_latency_ms_bucket{le="10"} 1',
    'my_latency_ms_bucket{le="100"} 3',
    'my_latency_ms_bucket{le="+Inf"} 4',
    'my_latency_ms_sum 250',
    'my_latency_ms_count 4',
  ].join('\n');
  const m = resolveMappings('custom', { waiting: 'my_queue', serviceHistogram: { name: 'my_latency_ms', unit: 'ms' } });
  const s = extractSignals(parseExposition(text), m);
  assert.equal(s.waiting, 7);
  assert.deepEqual(s.serviceHist?.boundsMs, [10, 100]);
  assert.equal(s.serviceHist?.sumMs, 250);
  // a vLLM mapping finds nothing here: no load signal
  assert.equal(hasLoadSignal(extractSignals(parseExposition(text), resolveMappings('vllm'))), false);
});

test('grammar: escapes, timestamps, NaN/Inf, exemplars, CRLF, comments', () => {
  const exp = parseExposition(
    [
      '# a comment',
      'm{path="C:\\\\DIR\\\\FILE.TXT",err="Cannot find file:\\n\\"FILE.TXT\\""} 1.458255915e9 1395066363000',
      'nan_metric NaN',
      'inf_metric{a="b",} +Inf\r',
      'neg -Inf',
      'x_total{a="1"} 5 # {trace_id="abc"} 1 1700000000.1',
      '# EOF',
    ].join('\n'),
  );
  const m = exp.samples.get('m')![0];
  assert.equal(m.labels.path, 'C:\\DIR\\FILE.TXT');
  assert.equal(m.labels.err, 'Cannot find file:\n"FILE.TXT"');
  assert.equal(m.value, 1.458255915e9);
  assert.equal(m.timestampMs, 1395066363000);
  assert.ok(Number.isNaN(exp.samples.get('nan_metric')![0].value));
  assert.equal(exp.samples.get('inf_metric')![0].value, Infinity);
  assert.equal(exp.samples.get('neg')![0].value, -Infinity);
  assert.equal(exp.samples.get('x_total')![0].value, 5);
});

test('malformed exposition: errors name the line and the problem', () => {
  const cases: Array<[string, RegExp]> = [
    [fx('malformed-unterminated-label.txt'), /line 6: unterminated value of label model_name/],
    [fx('malformed-html.txt'), /line 1: invalid metric name "<html><head><title>502"/],
    ['foo abc\n', /line 1: invalid value "abc" for foo/],
    ['ok 1\nfoo 1 2 3\n', /line 2: unexpected text after the value of foo/],
    ['foo{a="b" c="d"} 1\n', /expected ',' or '}' after label a/],
    ['foo{a="b",a="c"} 1\n', /duplicate label a/],
    ['# TYPE foo gauge\n# TYPE foo counter\n', /line 2: second TYPE line for foo/],
    ['# TYPE foo histgram\n', /unknown metric type "histgram"/],
    ['# TYPE h histogram\nh_bucket{x="1"} 1\n', /histogram bucket of h without an le label/],
    ['foo\n', /missing value for foo/],
    ['foo 1 notatime\n', /invalid timestamp/],
  ];
  for (const [text, re] of cases) {
    assert.throws(() => parseExposition(text), (e: unknown) => e instanceof ExpositionParseError && re.test(e.message), `expected ${re} for ${JSON.stringify(text.slice(0, 40))}`);
  }
});

test('structurally broken histograms are rejected by extraction', () => {
  const noInf = '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n';
  assert.throws(() => histogramSeries(parseExposition(noInf), 'h'), /no le="\+Inf" bucket/);
  const decreasing = '# TYPE h histogram\nh_bucket{le="1"} 5\nh_bucket{le="2"} 3\nh_bucket{le="+Inf"} 5\nh_sum 1\nh_count 5\n';
  assert.throws(() => histogramSeries(parseExposition(decreasing), 'h'), /bucket counts decrease at le=2/);
});

test('two label sets of one histogram stay separate and are summed by extraction', () => {
  const text = [
    '# TYPE vllm:e2e_request_latency_seconds histogram',
    ...['a', 'b'].flatMap((m, k) => [
      `vllm:e2e_request_latency_seconds_bucket{le="0.5",model_name="${m}"} ${k + 1}`,
      `vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="${m}"} ${2 * (k + 1)}`,
      `vllm:e2e_request_latency_seconds_count{model_name="${m}"} ${2 * (k + 1)}`,
      `vllm:e2e_request_latency_seconds_sum{model_name="${m}"} ${k + 1}`,
    ]),
  ].join('\n');
  const exp = parseExposition(text);
  const series = histogramSeries(exp, 'vllm:e2e_request_latency_seconds');
  assert.equal(series.length, 2);
  const s = extractSignals(exp, resolveMappings('vllm'));
  assert.deepEqual(s.latencyHist?.cumulative, [3, 6]);
  assert.equal(s.latencyHist?.count, 6);
  assert.equal(s.latencyHist?.sumMs, 3000);
  // model filter
  const a = extractSignals(exp, resolveMappings('vllm'), { model_name: 'a' });
  assert.equal(a.latencyHist?.count, 2);
});
