// extractSignals / hasLoadSignal / mappedSampleFilter on hand-written pages: which series a
// mapping reads, how several series combine, units, and what is reported as matched.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { histogramSeries, parseExposition } from '../../agent/src/inference/exposition';
import { extractSignals, hasLoadSignal, mappedSampleFilter, resolveMappings, UNIT_TO_MS } from '../../agent/src/inference/mappings';

const page = (...lines: string[]): ReturnType<typeof parseExposition> => parseExposition(lines.join('\n') + '\n');

test('service-time sum: minus the queue-time sum when exported, alone otherwise; both names reported as matched', () => {
  const m = resolveMappings('triton');
  const both = extractSignals(
    page(
      '# TYPE nv_inference_request_duration_us counter',
      'nv_inference_request_duration_us{model="a"} 5000000',
      'nv_inference_request_duration_us{model="b"} 3000000',
      '# TYPE nv_inference_queue_duration_us counter',
      'nv_inference_queue_duration_us{model="a"} 1000000',
    ),
    m,
  );
  assert.equal(both.serviceSumMs, 7000); // (5e6 + 3e6 - 1e6) us
  assert.deepEqual(both.matched.sort(), ['nv_inference_queue_duration_us', 'nv_inference_request_duration_us']);

  const alone = extractSignals(page('# TYPE nv_inference_request_duration_us counter', 'nv_inference_request_duration_us 2500'), m);
  assert.equal(alone.serviceSumMs, 2.5);
  assert.deepEqual(alone.matched, ['nv_inference_request_duration_us']);
  assert.ok(hasLoadSignal(alone), 'a service-time sum alone is a load signal');

  // no service-time sum: the queue sum alone is not read
  const none = extractSignals(page('# TYPE nv_inference_queue_duration_us counter', 'nv_inference_queue_duration_us 10'), m);
  assert.equal(none.serviceSumMs, undefined);
  assert.deepEqual(none.matched, []);
  assert.equal(hasLoadSignal(none), false);
});

test('hasLoadSignal: each load signal alone is enough; KV cache, slots and summary quantiles alone are not', () => {
  const h = { boundsMs: [1], cumulative: [1, 1], sumMs: 1, count: 1 };
  for (const s of [{ waiting: 0 }, { running: 0 }, { completions: 0 }, { serviceHist: h }, { latencyHist: h }, { serviceSumMs: 0 }, { gpuUtil: 0 }]) {
    assert.equal(hasLoadSignal({ matched: [], ...s }), true, JSON.stringify(s));
  }
  assert.equal(hasLoadSignal({ matched: ['x'], kvCacheUsage: 0.5, slots: 4, summaryP50Ms: 1, summaryP99Ms: 2 }), false);
});

test('gauges: waiting/running/completions summed over series, KV cache and slots the max, GPU util the scaled mean clamped to [0, 1]', () => {
  const m = resolveMappings('custom', {
    waiting: 'w',
    running: 'r',
    completions: 'done_total',
    kvCacheUsage: 'kv',
    slots: 'slots',
    gpuUtil: { name: 'gpu', scale: 0.01 },
  });
  const s = extractSignals(
    page('w{i="1"} 2', 'w{i="2"} 3', 'r{i="1"} 1', 'r{i="2"} 4', 'done_total{i="1"} 10', 'done_total{i="2"} 5', 'kv{i="1"} 0.25', 'kv{i="2"} 0.5', 'slots{i="1"} 8', 'slots{i="2"} 16', 'gpu{g="0"} 40', 'gpu{g="1"} 80'),
    m,
  );
  assert.equal(s.waiting, 5);
  assert.equal(s.running, 5);
  assert.equal(s.completions, 15);
  assert.equal(s.kvCacheUsage, 0.5);
  assert.equal(s.slots, 16);
  assert.ok(Math.abs((s.gpuUtil ?? NaN) - 0.6) < 1e-12, `gpu ${s.gpuUtil}`);
  // GPU util over 100 % reads as 1, a negative one as 0
  assert.equal(extractSignals(page('gpu 250'), m).gpuUtil, 1);
  assert.equal(extractSignals(page('gpu -5'), m).gpuUtil, 0);
  // a negative KV-cache maximum is still the maximum (not -Infinity or 0)
  assert.equal(extractSignals(page('kv{i="1"} -3', 'kv{i="2"} -2'), m).kvCacheUsage, -2);
});

test('label match: only the series carrying the labels are read', () => {
  const m = resolveMappings('custom', { waiting: 'w' });
  const p = page('w{model="a"} 2', 'w{model="b"} 7');
  assert.equal(extractSignals(p, m, { model: 'b' }).waiting, 7);
  assert.equal(extractSignals(p, m).waiting, 9);
  assert.equal(extractSignals(p, m, { model: 'c' }).waiting, undefined);
});

test('NaN: kept for load gauges (the estimator rejects it), dropped for auxiliary ones', () => {
  const m = resolveMappings('custom', { waiting: 'w', kvCacheUsage: 'kv' });
  const s = extractSignals(page('w NaN', 'kv{i="1"} NaN', 'kv{i="2"} 0.5'), m);
  assert.ok(Number.isNaN(s.waiting));
  assert.equal(s.kvCacheUsage, 0.5);
  assert.equal(extractSignals(page('kv NaN'), m).kvCacheUsage, undefined);
});

test('histograms: series of the first layout summed (others ignored), bounds and sums converted to ms', () => {
  const m = resolveMappings('custom', { serviceHistogram: { name: 'svc', unit: 'ms' } });
  const s = extractSignals(
    page(
      '# TYPE svc histogram',
      'svc_bucket{i="1",le="10"} 1',
      'svc_bucket{i="1",le="+Inf"} 2',
      'svc_sum{i="1"} 30',
      'svc_count{i="1"} 2',
      'svc_bucket{i="2",le="10"} 3',
      'svc_bucket{i="2",le="+Inf"} 4',
      'svc_sum{i="2"} 50',
      'svc_count{i="2"} 4',
      'svc_bucket{i="3",le="20"} 9',
      'svc_bucket{i="3",le="+Inf"} 9',
      'svc_sum{i="3"} 90',
      'svc_count{i="3"} 9',
    ),
    m,
  );
  assert.deepEqual(s.serviceHist, { boundsMs: [10], cumulative: [4, 6], sumMs: 80, count: 6 });
  assert.deepEqual(s.matched, ['svc']);
  assert.equal(UNIT_TO_MS.us, 1e-3);
  assert.equal(UNIT_TO_MS.ns, 1e-6);
});

test('summary quantiles: the worst series of 0.5 and 0.99, in ms; NaN samples skipped', () => {
  const m = resolveMappings('custom', { latencySummary: { name: 'lat', unit: 's' } });
  const s = extractSignals(
    page('# TYPE lat summary', 'lat{m="a",quantile="0.5"} 0.1', 'lat{m="b",quantile="0.5"} 0.3', 'lat{m="a",quantile="0.99"} 2', 'lat{m="b",quantile="0.99"} NaN', 'lat_sum{m="a"} 5', 'lat_count{m="a"} 10'),
    m,
  );
  assert.equal(s.summaryP50Ms, 300);
  assert.equal(s.summaryP99Ms, 2000);
});

test('custom mappings come before the built-in ones; the first present name wins', () => {
  const m = resolveMappings('vllm', { waiting: ['mine', 'also_mine'] });
  assert.deepEqual(m.waiting, ['mine', 'also_mine', 'vllm:num_requests_waiting']);
  assert.equal(extractSignals(page('vllm:num_requests_waiting 4', 'also_mine 1'), m).waiting, 1);
  assert.equal(extractSignals(page('vllm:num_requests_waiting 4'), m).waiting, 4);
  // the built-in table itself is not changed by a resolution with custom names
  assert.deepEqual(resolveMappings('vllm').waiting, ['vllm:num_requests_waiting']);
});

test('mappedSampleFilter: mapped names and their _bucket/_sum/_count series pass, others do not', () => {
  const keep = mappedSampleFilter(resolveMappings('triton'));
  assert.equal(keep('nv_inference_pending_request_count'), true);
  assert.equal(keep('nv_inference_request_summary_us_sum'), true);
  assert.equal(keep('nv_inference_request_summary_us_count'), true);
  assert.equal(keep('nv_inference_request_summary_us_bucket'), true);
  assert.equal(keep('nv_inference_request_summary_us_total'), false);
  assert.equal(keep('unrelated_metric'), false);
});

test('histogramSeries: duplicate le and a missing _sum are refused naming the series; _count defaults to the +Inf bucket; buckets sorted by le', () => {
  const dup = '# TYPE h histogram\nh_bucket{a="x",le="1"} 1\nh_bucket{a="x",le="1.0"} 2\nh_bucket{a="x",le="+Inf"} 2\nh_sum{a="x"} 1\n';
  assert.throws(() => histogramSeries(parseExposition(dup), 'h'), /histogram h\{a="x"\}: duplicate le=1/);
  const noSum = '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_count 2\n';
  assert.throws(() => histogramSeries(parseExposition(noSum), 'h'), /histogram h: no _sum sample/);
  const unsorted = '# TYPE h histogram\nh_bucket{le="+Inf"} 4\nh_bucket{le="2"} 3\nh_bucket{le="0.5"} 1\nh_sum 3.5\n';
  assert.deepEqual(histogramSeries(parseExposition(unsorted), 'h'), [{ labels: {}, bounds: [0.5, 2], cumulative: [1, 3, 4], sum: 3.5, count: 4 }]);
  assert.deepEqual(histogramSeries(parseExposition('up 1\n'), 'h'), []);
  // equal counts in neighbouring buckets are fine (an empty bucket)
  const flat = '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="2"} 2\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n';
  assert.deepEqual(histogramSeries(parseExposition(flat), 'h')[0].cumulative, [2, 2, 2]);
});
