// InstanceEstimator edges: where the slot count comes from, validation of a scrape's numbers,
// counter resets, layout changes, clock safety and the state before any scrape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { healthScore, histQuantile, InstanceEstimator, invalidSignals, secondMomentFromBuckets, trimmedMedian } from '../../agent/src/inference/estimator';
import type { Hist, Signals } from '../../agent/src/inference/mappings';

const close = (a: number, b: number, eps = 1e-9): void => assert.ok(Math.abs(a - b) <= eps * Math.max(1, Math.abs(b)), `${a} != ${b}`);
const s = (x: Partial<Signals>): Signals => ({ matched: [], ...x });
function hist(boundsMs: number[], counts: number[], sumMs: number): Hist {
  let acc = 0;
  return { boundsMs, cumulative: counts.map((c) => (acc += c)), sumMs, count: acc };
}

test('state() before any scrape: nothing known, default one slot, no throw', () => {
  const st = new InstanceEstimator().state();
  assert.equal(st.lambdaPerS, 0);
  assert.equal(st.departuresPerS, 0);
  for (const k of ['esMs', 'es2Ms2', 'p50Ms', 'p99Ms', 'rho', 'rhoLoad', 'rhoOcc', 'gpuUtil', 'queueDepth', 'waiting', 'running', 'kvCacheUsage', 'baselineP99Ms'] as const) {
    assert.ok(Number.isNaN(st[k]), `${k} = ${st[k]}`);
  }
  assert.equal(st.concurrency, 1);
  assert.equal(st.concurrencySource, 'default');
  assert.equal(st.slotsSource, 'inferred');
  assert.equal(st.invalid, undefined);
  assert.equal(st.counterResets, 0);
  assert.equal(st.windowCompletions, 0);
});

test('slots: a configured concurrency of 0 or below is ignored (inferred instead); a positive one wins over the exporter', () => {
  for (const concurrency of [0, -2]) {
    const e = new InstanceEstimator({ concurrency });
    const st = e.observe(0, s({ waiting: 0, running: 4, slots: 16 }));
    assert.equal(st.concurrencySource, 'exporter', `concurrency ${concurrency}`);
    assert.equal(st.concurrency, 16);
    const noExport = new InstanceEstimator({ concurrency }).observe(0, s({ waiting: 0, running: 4 }));
    assert.equal(noExport.concurrencySource, 'inferred-max-running');
    assert.equal(noExport.slotsSource, 'inferred');
  }
  const st = new InstanceEstimator({ concurrency: 3 }).observe(0, s({ waiting: 0, running: 4, slots: 16 }));
  assert.equal(st.concurrency, 3);
  assert.equal(st.slotsSource, 'configured');
});

test('slots from the exporter: floored; below 1 or not finite is not a slot count', () => {
  const at = (slots: number): ReturnType<InstanceEstimator['observe']> => new InstanceEstimator().observe(0, s({ waiting: 0, running: 2, slots }));
  const x = at(7.6);
  assert.deepEqual([x.concurrency, x.concurrencySource, x.slotsSource], [7, 'exporter', 'exporter']);
  assert.deepEqual([at(1).concurrency, at(1).concurrencySource], [1, 'exporter']);
  for (const bad of [0.5, 0, -4, Infinity, NaN]) {
    const y = at(bad);
    assert.equal(y.concurrencySource, 'inferred-max-running', `slots ${bad}`);
    assert.equal(y.concurrency, 3, `slots ${bad}`); // 2 running + margin 1
  }
});

test('slots inferred: the running count while a queue waits on consecutive scrapes, unless more ever ran; else max running + max(1, ⌈25 %⌉)', () => {
  const e = new InstanceEstimator();
  let st = e.observe(0, s({ waiting: 2, running: 4 }));
  // one scrape's queue is no capacity yet: 4 running + margin 1
  assert.deepEqual([st.concurrency, st.concurrencySource], [5, 'inferred-max-running']);
  st = e.observe(500, s({ waiting: 1, running: 4 }));
  assert.deepEqual([st.concurrency, st.concurrencySource], [4, 'inferred-saturated']);
  st = e.observe(1000, s({ waiting: 0, running: 4 }));
  assert.deepEqual([st.concurrency, st.concurrencySource], [4, 'inferred-saturated']);
  st = e.observe(2000, s({ waiting: 0, running: 6 }));
  assert.deepEqual([st.concurrency, st.concurrencySource], [8, 'inferred-max-running']); // 6 + ⌈1.5⌉
  st = e.observe(3000, s({ waiting: 0, running: 8 }));
  assert.equal(st.concurrency, 10); // 8 + 2
  const one = new InstanceEstimator().observe(0, s({ waiting: 0, running: 1 }));
  assert.equal(one.concurrency, 2); // 1 + max(1, ⌈0.25⌉)
  // running 0 only: nothing to infer from
  const idle = new InstanceEstimator().observe(0, s({ waiting: 0, running: 0 }));
  assert.deepEqual([idle.concurrency, idle.concurrencySource], [1, 'default']);
  // a queue without a running gauge says nothing about slots
  const q = new InstanceEstimator().observe(0, s({ waiting: 5 }));
  assert.deepEqual([q.concurrency, q.concurrencySource], [1, 'default']);
});

test('slots inferred: a queue one scrape caught (a request waiting for the next step) is no capacity', () => {
  // vLLM: a request is "waiting" from its arrival to the next step's schedule, whatever the free
  // slots; a worker mid-prefill shows waiting 1 at a scrape and admits it at the step's end.
  // Taken as saturation, 5 running became a capacity of 5 and every 6th request there was priced
  // a slot wait (llm-r7b.md: the cold-start Poisson tail).
  const e = new InstanceEstimator();
  let st = e.observe(0, s({ waiting: 1, running: 5 }));
  assert.deepEqual([st.concurrency, st.concurrencySource, st.slotsFloor], [7, 'inferred-max-running', true]);
  st = e.observe(1000, s({ waiting: 0, running: 5 }));
  st = e.observe(2000, s({ waiting: 1, running: 3 }));
  assert.deepEqual([st.concurrency, st.concurrencySource, st.slotsFloor], [7, 'inferred-max-running', true]);
  // the queue seen again at the next scrape: it persisted across steps, the slots are at most 3 … but 5 ran
  st = e.observe(3000, s({ waiting: 2, running: 3 }));
  assert.deepEqual([st.concurrency, st.concurrencySource], [7, 'inferred-max-running']);
});

test('counter reset: the inferred slot count starts over (a restarted server may have other slots)', () => {
  const e = new InstanceEstimator();
  e.observe(0, s({ completions: 100, serviceSumMs: 1000, waiting: 1, running: 6 }));
  let st = e.observe(1000, s({ completions: 110, serviceSumMs: 1100, waiting: 1, running: 6 }));
  assert.equal(st.concurrency, 6);
  st = e.observe(2000, s({ completions: 5, serviceSumMs: 50, waiting: 1, running: 2 }));
  assert.equal(st.counterResets, 1);
  assert.deepEqual([st.concurrency, st.concurrencySource], [2, 'inferred-saturated']);
  // the restart interval counts the new values as the increase: 10 + 5 completions over 2 s
  close(st.departuresPerS, 7.5);
  close(st.esMs, 150 / 15);
});

test('a single service-time sum reset (completions steady) is a restart too; a second within the window is a broken counter', () => {
  const e = new InstanceEstimator({ windowMs: 10_000 });
  e.observe(0, s({ completions: 10, serviceSumMs: 1000 }));
  let st = e.observe(1000, s({ completions: 20, serviceSumMs: 200 }));
  assert.equal(st.counterResets, 1);
  assert.equal(st.invalid, undefined);
  st = e.observe(2000, s({ completions: 30, serviceSumMs: 100 }));
  assert.match(st.invalid ?? '', /counter went backwards 2 times within 10 s/);
  assert.equal(st.counterResets, 1, 'the broken drop is not counted as a restart');
  // once the first drop has left the window, a new drop is a restart again
  st = e.observe(11_500, s({ completions: 40, serviceSumMs: 300 }));
  st = e.observe(25_000, s({ completions: 1, serviceSumMs: 10 }));
  assert.equal(st.invalid, undefined);
  assert.equal(st.counterResets, 2);
});

test('invalidSignals names the field and the value; the estimator keeps the last good estimate', () => {
  assert.equal(invalidSignals(s({ waiting: 0, running: 0, completions: 0, serviceSumMs: 0 })), undefined);
  assert.equal(invalidSignals(s({ waiting: -1 })), 'waiting is -1 (must be a finite number >= 0)');
  assert.equal(invalidSignals(s({ running: NaN })), 'running is NaN (must be a finite number >= 0)');
  assert.equal(invalidSignals(s({ completions: Infinity })), 'completions is Infinity (must be a finite number >= 0)');
  assert.equal(invalidSignals(s({ serviceSumMs: -5 })), 'serviceSum is -5 (must be a finite number >= 0)');
  const h = hist([10, 20], [1, 1, 0], 20);
  assert.equal(invalidSignals(s({ serviceHist: { ...h, count: -1 } })), 'serviceHistogram count is -1 (must be a finite number >= 0)');
  assert.equal(invalidSignals(s({ latencyHist: { ...h, sumMs: NaN } })), 'latencyHistogram sum is NaN (must be a finite number >= 0)');
  assert.equal(invalidSignals(s({ latencyHist: { ...h, cumulative: [1, NaN, 2] } })), 'latencyHistogram bucket 1 is NaN (must be a finite number >= 0)');
  assert.equal(invalidSignals(s({ serviceHist: { ...h, cumulative: [1, 2, -1] } })), 'serviceHistogram bucket 2 is -1 (must be a finite number >= 0)');
  // the first bad field is named: waiting before the histograms
  assert.match(invalidSignals(s({ waiting: -1, serviceHist: { ...h, count: -1 } })) ?? '', /^waiting/);
  // summary quantiles and auxiliary gauges are not load data
  assert.equal(invalidSignals(s({ summaryP99Ms: NaN, kvCacheUsage: -1, gpuUtil: NaN })), undefined);

  const e = new InstanceEstimator({ concurrency: 1 });
  e.observe(0, s({ completions: 0, serviceSumMs: 0 }));
  let st = e.observe(1000, s({ completions: 10, serviceSumMs: 200 }));
  close(st.esMs, 20);
  st = e.observe(2000, s({ completions: 20, serviceSumMs: -1 }));
  assert.equal(st.invalid, 'serviceSum is -1 (must be a finite number >= 0)');
  close(st.esMs, 20);
  assert.equal(st.lastObservedAt, 1000, 'the rejected scrape is not an observation');
  // the next good scrape is compared with the last good one
  st = e.observe(3000, s({ completions: 30, serviceSumMs: 1000 }));
  assert.equal(st.invalid, undefined);
  close(st.esMs, 1000 / 30);
  close(st.departuresPerS, 10);
});

test('a histogram whose bucket layout changes starts over: that interval counts nothing, the next one counts', () => {
  const e = new InstanceEstimator({ windowMs: 60_000, concurrency: 1 });
  e.observe(0, s({ serviceHist: hist([10, 20], [0, 0, 0], 0) }));
  let st = e.observe(1000, s({ serviceHist: hist([10, 20], [10, 0, 0], 50) }));
  close(st.esMs, 5);
  st = e.observe(2000, s({ serviceHist: hist([10, 30], [10, 10, 0], 250) }));
  assert.equal(st.windowCompletions, 10, 'the new layout interval adds no completion');
  assert.equal(st.counterResets, 0);
  close(st.esMs, 5);
  st = e.observe(3000, s({ serviceHist: hist([10, 30], [10, 20, 0], 450) }));
  assert.equal(st.windowCompletions, 20);
  close(st.esMs, (50 + 200) / 20); // both layouts' completions count for E[S]
});

test('clock safety: a scrape time that does not advance is moved just past the previous one', () => {
  const e = new InstanceEstimator({ concurrency: 1 });
  e.observe(1000, s({ completions: 0, serviceSumMs: 0 }));
  let st = e.observe(1000, s({ completions: 1, serviceSumMs: 10 }));
  assert.ok(st.lastObservedAt > 1000 && st.lastObservedAt < 1000.01, `at ${st.lastObservedAt}`);
  st = e.observe(500, s({ completions: 2, serviceSumMs: 20 }));
  assert.ok(st.lastObservedAt > 1000 && st.lastObservedAt < 1000.01, `at ${st.lastObservedAt}`);
  assert.equal(st.windowCompletions, 2);
  close(st.esMs, 10);
});

test('queue depth: waiting + running; one of them alone when the other is not exported', () => {
  assert.equal(new InstanceEstimator().observe(0, s({ waiting: 3, running: 2 })).queueDepth, 5);
  assert.equal(new InstanceEstimator().observe(0, s({ waiting: 3 })).queueDepth, 3);
  assert.equal(new InstanceEstimator().observe(0, s({ running: 2 })).queueDepth, 2);
  // neither gauge: unknown is not NaN (never routable) but Little's law, 0 before any rate is known
  const none = new InstanceEstimator().observe(0, s({ completions: 1 }));
  assert.equal(none.queueSource, 'little');
  assert.equal(none.queueDepth, 0);
  const st = new InstanceEstimator().observe(0, s({ waiting: 3, kvCacheUsage: 0.25, gpuUtil: 0.5 }));
  assert.equal(st.kvCacheUsage, 0.25);
  assert.equal(st.gpuUtil, 0.5);
  assert.ok(Number.isNaN(st.running));
});

test('ρ: rhoCombine gpu falls back to the load estimate without a GPU gauge; load ignores the GPU; occupancy when E[S] is unknown', () => {
  const run = (rhoCombine: 'max' | 'load' | 'gpu', gpuUtil?: number): ReturnType<InstanceEstimator['observe']> => {
    const e = new InstanceEstimator({ windowMs: 10_000, concurrency: 2, rhoCombine });
    e.observe(0, s({ completions: 0, serviceSumMs: 0, gpuUtil }));
    return e.observe(10_000, s({ completions: 100, serviceSumMs: 5000, gpuUtil }));
  };
  close(run('gpu').rho, (10 * 50) / 1000 / 2);
  close(run('gpu', 0.1).rho, 0.1);
  close(run('load', 0.9).rho, 0.25);
  close(run('max', 0.1).rho, 0.25);
  close(run('max', 0.9).rho, 0.9);
  // no E[S] (no completions, no sum): ρ from the mean running count over the window's scrapes
  const e = new InstanceEstimator({ concurrency: 4 });
  e.observe(0, s({ running: 1 }));
  const st = e.observe(1000, s({ running: 3 }));
  close(st.rhoOcc, 0.5);
  close(st.rho, 0.5);
  assert.ok(Number.isNaN(st.rhoLoad));
});

test('pure helpers at their edges: histQuantile, trimmedMedian, healthScore', () => {
  assert.ok(Number.isNaN(histQuantile([10], [0, 0], 0.5)));
  assert.ok(Number.isNaN(histQuantile([], [5], 0.5)), 'only a +Inf bucket: no finite bound to report');
  assert.equal(histQuantile([10, 20], [0, 0, 4], 0.5), 20);
  assert.ok(Number.isNaN(trimmedMedian([NaN, Infinity])));
  assert.equal(trimmedMedian([3, NaN, 1, 2]), 2);
  assert.equal(trimmedMedian([4, 1, 3, 2], 0), 2.5);
  assert.equal(healthScore(300, 100), 1);
  close(healthScore(600, 100), 0.5);
  close(healthScore(600, 100, 2), 200 / 600);
  for (const [p, b] of [[NaN, 100], [600, NaN], [600, 0], [0, 100], [-1, 100], [600, -5]]) assert.equal(healthScore(p, b), 1, `${p} ${b}`);
});

test('secondMomentFromBuckets without any request: unknown (method none), not a number derived from 0/0', () => {
  for (const counts of [[0, 0, 0], [0, 0]]) {
    const m = secondMomentFromBuckets([10, 20].slice(0, counts.length - 1), counts, 0);
    assert.equal(m.method, 'none');
    assert.ok(Number.isNaN(m.es2) && Number.isNaN(m.errBound));
  }
});

test('occupancy ρ: scrapes without a running gauge are left out of the mean, not counted as NaN or 0', () => {
  const e = new InstanceEstimator({ concurrency: 4 });
  e.observe(0, s({ running: 2, waiting: 0 }));
  e.observe(1000, s({ waiting: 1 }));
  const st = e.observe(2000, s({ running: 4, waiting: 0 }));
  close(st.rhoOcc, 3 / 4);
  const none = new InstanceEstimator({ concurrency: 4 }).observe(0, s({ waiting: 1 }));
  assert.ok(Number.isNaN(none.rhoOcc));
});

test('quantiles from a summary when no latency histogram is exported: both, or the one that is there', () => {
  const e = new InstanceEstimator({ concurrency: 1 });
  e.observe(0, s({ completions: 0, serviceSumMs: 0, summaryP50Ms: 40, summaryP99Ms: 300 }));
  let st = e.observe(1000, s({ completions: 10, serviceSumMs: 500, summaryP50Ms: 45, summaryP99Ms: 320 }));
  assert.deepEqual([st.p50Ms, st.p99Ms], [45, 320]);
  st = e.observe(2000, s({ completions: 20, serviceSumMs: 1000, summaryP99Ms: 350 }));
  assert.ok(Number.isNaN(st.p50Ms), `p50 ${st.p50Ms}`);
  assert.equal(st.p99Ms, 350);
  st = e.observe(3000, s({ completions: 30, serviceSumMs: 1500, summaryP50Ms: 50 }));
  assert.deepEqual([st.p50Ms, Number.isNaN(st.p99Ms)], [50, true]);
});

test("queue unknown: Little's law λ·(E[S] + E[Wq]) from the instance's own counters, the queue-time sum included when exported", () => {
  // Triton-style counters without the pending gauge: 10 requests/s, E[S] = 200 ms, E[Wq] = 100 ms
  const e = new InstanceEstimator({ concurrency: 4 });
  let st = e.observe(0, s({ completions: 0, serviceSumMs: 0, queueSumMs: 0 }));
  for (let k = 1; k <= 5; k++) st = e.observe(k * 1000, s({ completions: 10 * k, serviceSumMs: 2000 * k, queueSumMs: 1000 * k }));
  assert.equal(st.queueSource, 'little');
  close(st.lambdaPerS, 10);
  close(st.esMs, 200);
  close(st.queueDepth, 10 * (0.2 + 0.1), 1e-9);
  // without a queue-time sum: the mean number in service
  const f = new InstanceEstimator({ concurrency: 4 });
  f.observe(0, s({ completions: 0, serviceSumMs: 0 }));
  for (let k = 1; k <= 5; k++) st = f.observe(k * 1000, s({ completions: 10 * k, serviceSumMs: 2000 * k }));
  close(st.queueDepth, 2, 1e-9);
  // a gauge present: read, not estimated
  const g = new InstanceEstimator({ concurrency: 4 });
  g.observe(0, s({ completions: 0, serviceSumMs: 0, waiting: 7 }));
  st = g.observe(1000, s({ completions: 10, serviceSumMs: 2000, waiting: 7 }));
  assert.equal(st.queueSource, 'gauges');
  assert.equal(st.queueDepth, 7);
});
