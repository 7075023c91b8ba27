import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BaselineTracker, healthScore, histQuantile, InstanceEstimator, secondMomentFromBuckets, trimmedMedian } from '../../agent/src/inference/estimator';
import { extractSignals, resolveMappings, type Hist, type Signals } from '../../agent/src/inference/mappings';
import { parseExposition } from '../../agent/src/inference/exposition';
import { buildInstanceRecord } from '../../agent/src/inference/collector';
import { makeDistribution, type DistSpec } from '../../sim/inference/distributions';
import { TGI_DURATION_BUCKETS, VLLM_FINE_BUCKETS } from '../../sim/inference/queue';

const close = (a: number, b: number, eps = 1e-9, msg?: string): void => assert.ok(Math.abs(a - b) <= eps * Math.max(1, Math.abs(b)), msg ?? `${a} != ${b}`);

/** cumulative histogram from per-bucket counts */
function hist(boundsMs: number[], counts: number[], sumMs: number): Hist {
  let acc = 0;
  const cumulative = counts.map((c) => (acc += c));
  return { boundsMs, cumulative, sumMs, count: acc };
}
const sig = (h: Hist | undefined, extra: Partial<Signals> = {}): Signals => ({ serviceHist: h, latencyHist: h, matched: [], ...extra });

test('histQuantile: Prometheus interpolation, first bucket from 0, +Inf bucket -> highest bound', () => {
  const b = [100, 200, 400];
  const c = [20, 50, 20, 10];
  close(histQuantile(b, c, 0.5), 160); // rank 50: 100 + 100*(50-20)/50
  close(histQuantile(b, c, 0.1), 50); // rank 10 in (0,100]
  close(histQuantile(b, c, 0.9), 400); // rank 90: 200 + 200*(90-70)/20
  assert.equal(histQuantile(b, c, 0.99), 400); // in +Inf
  assert.ok(Number.isNaN(histQuantile(b, [0, 0, 0, 0], 0.5)));
});

test('E[S²] with flat densities is the uniform second moment (hand computed)', () => {
  // uniform on (0, 400]: 25 per 100 ms -> E[S²] = 400²/3
  const r = secondMomentFromBuckets([100, 200, 300, 400], [25, 25, 25, 25, 0], 25 * (50 + 150 + 250 + 350));
  assert.equal(r.method, 'buckets');
  close(r.es2, 160000 / 3);
  // worst-case bound: Σ p_i w_i (2u_i + l_i)/3
  close(r.errBound, (100 * (200 + 0) + 100 * (400 + 100) + 100 * (600 + 200) + 100 * (800 + 300)) / 3 / 4);
});

test('E[S²] open bucket: exponential tail with θ = n∞ / f(L) (hand computed)', () => {
  // uniform (0,300] with 30 per bucket, 10 beyond 300: f(L) = 0.3/ms -> θ = 33.33, m∞ = 333.33
  const r = secondMomentFromBuckets([100, 200, 300], [30, 30, 30, 10], 0 /* sum unused when f(L) > 0 */ + 13500 + 10 * (300 + 100 / 3));
  const th = 10 / 0.3;
  const expected = (90 * 30000 + 10 * ((300 + th) ** 2 + th ** 2)) / 100;
  close(r.es2, expected);
});

test('E[S²] linear-density refinement (hand computed slopes)', () => {
  // bucket 0: d=0.6, edges 0.6 | (0.3*100+60)/200=0.45 -> b=-0.0015 ; bucket 1: edges 0.45 | 0.3 -> b=-0.0015
  const r = secondMomentFromBuckets([100, 200], [60, 30, 0], 90 * 80);
  const b0 = 60 * (50 ** 2 + 100 ** 2 / 12) + (-0.0015 * 50 * 1e6) / 6;
  const b1 = 30 * (150 ** 2 + 100 ** 2 / 12) + (-0.0015 * 150 * 1e6) / 6;
  close(r.es2, (b0 + b1) / 90);
  close(r.es2, 850000 / 90);
});

test('E[S²] resolution guard: one bucket with >= 80 % of the mass -> (1+scv)·E[S]², clamped', () => {
  // 80 ms requests all in vLLM's first e2e bucket (0, 300]: uniform would say 30000 ms²
  const r = secondMomentFromBuckets([300, 500], [100, 0, 0], 100 * 80, 1);
  assert.equal(r.method, 'assumed-scv');
  close(r.es2, 2 * 80 * 80);
  // scv so large the buckets forbid it: capped at Σ p u² = 300²
  close(secondMomentFromBuckets([300, 500], [100, 0, 0], 100 * 80, 100).es2, 90000);
  // Jensen floor
  close(secondMomentFromBuckets([300, 500], [100, 0, 0], 100 * 80, 0).es2, 6400);
});

test('E[S²] against exact values of known distributions (exact bucket masses, 1e6 requests)', () => {
  const ladders: Record<string, number[]> = {
    'geometric 1.25': Array.from({ length: 60 }, (_, k) => Math.pow(1.25, k)),
    'TGI 1.5': TGI_DURATION_BUCKETS.map((b) => b * 1000),
    'vLLM fine': VLLM_FINE_BUCKETS.map((b) => b * 1000),
  };
  // [ladder, dist, max relative error]
  const cases: Array<[string, DistSpec, number]> = [
    ['geometric 1.25', { kind: 'exponential', meanMs: 80 }, 0.01],
    ['geometric 1.25', { kind: 'lognormal', meanMs: 80, sigma: 1 }, 0.01],
    ['geometric 1.25', { kind: 'bounded-pareto', alpha: 1.5, minMs: 10, maxMs: 10000 }, 0.01],
    ['TGI 1.5', { kind: 'exponential', meanMs: 80 }, 0.01],
    ['TGI 1.5', { kind: 'lognormal', meanMs: 80, sigma: 0.5 }, 0.01],
    ['TGI 1.5', { kind: 'lognormal', meanMs: 2000, sigma: 1 }, 0.015],
    ['TGI 1.5', { kind: 'bounded-pareto', alpha: 1.5, minMs: 10, maxMs: 10000 }, 0.02],
    ['vLLM fine', { kind: 'lognormal', meanMs: 2000, sigma: 1 }, 0.02],
    ['vLLM fine', { kind: 'exponential', meanMs: 2000 }, 0.05],
    ['vLLM fine', { kind: 'lognormal', meanMs: 80, sigma: 1 }, 0.1],
  ];
  for (const [ln, spec, tol] of cases) {
    const b = ladders[ln];
    const d = makeDistribution(spec);
    const N = 1e6;
    const counts = b.map((u, i) => Math.round((d.cdf(u) - (i ? d.cdf(b[i - 1]) : 0)) * N));
    counts.push(Math.round((1 - d.cdf(b[b.length - 1])) * N));
    const n = counts.reduce((x, y) => x + y, 0);
    const r = secondMomentFromBuckets(b, counts, d.mean * n);
    const rel = Math.abs(r.es2 - d.secondMoment) / d.secondMoment;
    assert.ok(rel <= tol, `${ln} ${JSON.stringify(spec)}: relative error ${(rel * 100).toFixed(2)} % > ${tol * 100} %`);
    // the documented worst-case bound holds (open bucket empty or negligible here)
    assert.ok(Math.abs(r.es2 - d.secondMoment) <= r.errBound * 1.001, `${ln} ${JSON.stringify(spec)}: error above the bound`);
  }
});

test('worst-case bound is attained by point masses at the bucket edges', () => {
  // all mass at the upper edge of (100, 200]: true E[S²] = 40000; estimate (linear model, flat) = 23333.3
  const r = secondMomentFromBuckets([100, 200, 300, 400], [0, 50, 0, 0, 0], 50 * 200, 1);
  // 100 % in one bucket -> resolution guard applies; the bound is still reported
  close(r.errBound, (100 * (400 + 100)) / 3);
  const uniformEstimate = (100 ** 2 + 100 * 200 + 200 ** 2) / 3;
  assert.ok(40000 - uniformEstimate <= r.errBound + 1e-9);
});

test('trimmed median and baseline: top 10 % dropped, 5-minute window, min samples', () => {
  const v = Array.from({ length: 20 }, (_, i) => (i + 1) * 10); // 10..200
  close(trimmedMedian(v, 0.1), 95); // drop 190, 200 -> median of 10..180
  close(trimmedMedian([5, 1, 3], 0.1), 3); // floor(0.3) = 0 dropped
  const b = new BaselineTracker(300_000, 0.1, 5);
  for (let i = 0; i < 4; i++) b.add(i * 1000, 100);
  assert.ok(Number.isNaN(b.value(4000)));
  b.add(4000, 100);
  close(b.value(4000), 100);
  // a burst of slow samples: 2 of 20 are trimmed, the median stays put
  for (let i = 0; i < 13; i++) b.add(5000 + i, 100);
  b.add(6000, 5000);
  b.add(6001, 5000);
  close(b.value(6001), 100);
  // samples older than 5 minutes fall out
  b.add(400_000, 700);
  assert.ok(Number.isNaN(b.value(400_000)), 'all older samples expired: below min samples again');
  assert.equal(b.size, 1);
});

test('health score: 1 up to 3x baseline, then 3·baseline/p99', () => {
  assert.equal(healthScore(250, 100), 1);
  assert.equal(healthScore(300, 100), 1);
  close(healthScore(400, 100), 0.75);
  close(healthScore(600, 100), 0.5);
  close(healthScore(1200, 100), 0.25);
  assert.equal(healthScore(NaN, 100), 1);
  assert.equal(healthScore(500, NaN), 1);
});

test('estimator: λ, E[S], E[S²], P50/P99 from one window of histogram deltas', () => {
  const e = new InstanceEstimator({ windowMs: 10_000, concurrency: 4 });
  const b = [100, 200, 400];
  e.observe(0, sig(hist(b, [0, 0, 0, 0], 0)));
  const st = e.observe(10_000, sig(hist(b, [20, 50, 20, 10], 25_000)));
  close(st.lambdaPerS, 10); // 100 completions / 10 s (no queue gauges: departures)
  close(st.esMs, 250);
  close(st.es2Ms2, secondMomentFromBuckets(b, [20, 50, 20, 10], 25_000).es2);
  assert.equal(st.es2Method, 'buckets');
  close(st.p50Ms, 160);
  assert.equal(st.p99Ms, 400);
  close(st.rho, (10 * 250) / 1000 / 4);
  assert.equal(st.concurrencySource, 'configured');
});

test('estimator: queue growth corrects the departure-rate bias of λ; ρ combination with GPU util', () => {
  const mk = (rhoCombine: 'max' | 'load' | 'gpu'): ReturnType<InstanceEstimator['observe']> => {
    const e = new InstanceEstimator({ windowMs: 10_000, concurrency: 4, rhoCombine });
    const b = [100, 200, 400];
    e.observe(0, sig(hist(b, [0, 0, 0, 0], 0), { waiting: 0, running: 2, gpuUtil: 0.9 }));
    return e.observe(10_000, sig(hist(b, [20, 50, 20, 10], 25_000), { waiting: 5, running: 4, gpuUtil: 0.9 }));
  };
  const st = mk('load');
  close(st.departuresPerS, 10);
  close(st.lambdaPerS, (100 + (9 - 2)) / 10); // arrivals = departures + growth of the population
  close(st.rho, (10.7 * 250) / 1000 / 4);
  close(st.rhoLoad, 0.66875);
  close(mk('max').rho, 0.9);
  close(mk('gpu').rho, 0.9);
  assert.equal(st.queueDepth, 9); // waiting 5 + running 4
  assert.equal(st.waiting, 5);
});

test('estimator: counter reset (restart) takes the new values as the increase; window slides', () => {
  const e = new InstanceEstimator({ windowMs: 30_000, concurrency: 1 });
  const b = [100, 200, 400];
  e.observe(0, sig(hist(b, [0, 0, 0, 0], 0)));
  e.observe(10_000, sig(hist(b, [20, 50, 20, 10], 25_000)));
  const st = e.observe(20_000, sig(hist(b, [5, 5, 0, 0], 1500))); // count dropped 100 -> 10
  assert.equal(st.counterResets, 1);
  close(st.lambdaPerS, 110 / 20);
  close(st.esMs, 26_500 / 110);
  // a 10 s window keeps only the post-restart interval for rates and quantiles; E[S] reaches back
  // to the older interval because the window holds fewer than 50 completions
  const e2 = new InstanceEstimator({ windowMs: 10_000, concurrency: 1 });
  e2.observe(0, sig(hist(b, [0, 0, 0, 0], 0)));
  e2.observe(10_000, sig(hist(b, [20, 50, 20, 10], 25_000)));
  const s2 = e2.observe(20_000, sig(hist(b, [5, 5, 0, 0], 1500)));
  close(s2.lambdaPerS, 1);
  close(s2.esMs, 26_500 / 110);
  close(s2.p50Ms, 100); // rank 5 of 10: exactly the top of the first bucket
  const e3 = new InstanceEstimator({ windowMs: 10_000, concurrency: 1, minMomentCompletions: 10 });
  e3.observe(0, sig(hist(b, [0, 0, 0, 0], 0)));
  e3.observe(10_000, sig(hist(b, [20, 50, 20, 10], 25_000)));
  close(e3.observe(20_000, sig(hist(b, [5, 5, 0, 0], 1500))).esMs, 150);
});

test('estimator: counters-only server (Triton) -> E[S] from sums, E[S²] from the assumed scv', () => {
  const e = new InstanceEstimator({ windowMs: 10_000, concurrency: 2, assumedScv: 1 });
  e.observe(0, { completions: 1000, serviceSumMs: 20_000, waiting: 1, matched: [] });
  const st = e.observe(2_000, { completions: 1100, serviceSumMs: 22_400, waiting: 1, matched: [] });
  close(st.lambdaPerS, 50); // in-system unchanged
  close(st.esMs, 24);
  close(st.es2Ms2, 2 * 24 * 24);
  assert.equal(st.es2Method, 'assumed-scv');
  close(st.rho, (50 * 24) / 1000 / 2);
  assert.ok(Number.isNaN(st.p99Ms));
});

test('estimator: idle window keeps the last E[S], P99 unknown, λ = 0, ρ falls to 0; concurrency inferred when saturated', () => {
  const e = new InstanceEstimator({ windowMs: 5_000 });
  const b = [100, 200, 400];
  // the queue on two consecutive scrapes: saturated at 6 (one scrape's queue is no capacity)
  e.observe(-1_000, sig(hist(b, [0, 0, 0, 0], 0), { waiting: 2, running: 6 }));
  e.observe(0, sig(hist(b, [0, 0, 0, 0], 0), { waiting: 3, running: 6 }));
  let st = e.observe(1_000, sig(hist(b, [10, 0, 0, 0], 500), { waiting: 0, running: 2 }));
  close(st.p50Ms, 50);
  assert.equal(st.concurrency, 6);
  assert.equal(st.concurrencySource, 'inferred-saturated');
  for (let t = 2_000; t <= 12_000; t += 1_000) st = e.observe(t, sig(hist(b, [10, 0, 0, 0], 500), { waiting: 0, running: 0 }));
  assert.equal(st.windowCompletions, 0);
  assert.equal(st.lambdaPerS, 0);
  close(st.esMs, 50);
  assert.equal(st.rho, 0);
  // the window's requests are gone: no latency evidence, so no "slow" verdict that could stick
  assert.ok(Number.isNaN(st.p50Ms) && Number.isNaN(st.p99Ms), `p50 ${st.p50Ms} p99 ${st.p99Ms}`);
});

test('estimator: E[S] rests on >= minMomentCompletions requests, reaching back before the window', () => {
  // 1 s scrapes, 5 s window. First 10 s: 10 completions of 10 ms per second (100 requests). Then
  // idle past the window, then ONE request of 2000 ms. A window-only mean would say E[S] = 2000
  // (an instance 200x slower than it is, which then gets no traffic to correct it); reaching back
  // by whole scrape intervals (10 completions each) to >= 50 completions: (2000 + 50·10)/51.
  const b = [5, 20, 5000];
  const e = new InstanceEstimator({ windowMs: 5_000, concurrency: 1 });
  let n = 0;
  let sum = 0;
  const at = (t: number): ReturnType<InstanceEstimator['observe']> => e.observe(t, sig(hist(b, [0, n, 0, 0], sum)));
  at(0);
  for (let t = 1_000; t <= 10_000; t += 1_000) {
    n += 10;
    sum += 100;
    at(t);
  }
  let st = at(16_000); // idle window: E[S] still from the last requests, not forgotten
  assert.equal(st.windowCompletions, 0);
  close(st.esMs, 10);
  // one long request: the cumulative histogram moves it into the (20, 5000] bucket
  const e2 = (t: number): ReturnType<InstanceEstimator['observe']> => e.observe(t, sig({ boundsMs: b, cumulative: [0, n, n + 1, n + 1], sumMs: sum + 2000, count: n + 1 }));
  st = e2(17_000);
  assert.equal(st.windowCompletions, 1);
  close(st.esMs, (2000 + 50 * 10) / 51);
  // the older intervals kept are just enough for 50 completions (memory stays bounded)
  assert.ok((e as unknown as { older: unknown[] }).older.length <= 6, `kept ${(e as unknown as { older: unknown[] }).older.length} intervals`);
  // minMomentCompletions 1: the window alone
  const w = new InstanceEstimator({ windowMs: 5_000, concurrency: 1, minMomentCompletions: 1 });
  w.observe(0, sig(hist(b, [0, 0, 0, 0], 0)));
  w.observe(1_000, sig(hist(b, [0, 100, 0, 0], 1000)));
  w.observe(16_000, sig(hist(b, [0, 100, 0, 0], 1000)));
  close(w.observe(17_000, sig({ boundsMs: b, cumulative: [0, 100, 101, 101], sumMs: 3000, count: 101 })).esMs, 2000);
});

test('estimator against a discrete-event M/G/1 run: λ, E[S], E[S²] within sampling error', async () => {
  const { simulateFifo } = await import('../../sim/inference/queue');
  const { mulberry32 } = await import('../../sim/inference/prng');
  const rng = mulberry32(42);
  const d = makeDistribution({ kind: 'lognormal', meanMs: 20, sigma: 0.8 });
  const lambda = 25; // per s -> rho = 0.5
  const arrivals: number[] = [];
  let t = 0;
  for (let i = 0; i < 20000; i++) {
    t += (-Math.log(1 - rng()) / lambda) * 1000;
    arrivals.push(t);
  }
  const { model } = simulateFifo({ concurrency: 1, arrivalsMs: arrivals, serviceMs: arrivals.map(() => d.sample(rng)), bucketsS: TGI_DURATION_BUCKETS });
  const h = model.serviceTime;
  const e = new InstanceEstimator({ windowMs: 1e9, concurrency: 1 });
  e.observe(0, sig(hist(h.bounds.map((x) => x * 1000), new Array(h.counts.length).fill(0), 0)));
  const st = e.observe(t, sig({ boundsMs: h.bounds.map((x) => x * 1000), cumulative: h.cumulative(), sumMs: h.sum * 1000, count: h.count }));
  close(st.lambdaPerS, lambda, 0.03);
  close(st.esMs, d.mean, 0.03);
  close(st.es2Ms2, d.secondMoment, 0.08);
  close(st.rho, 0.5, 0.05);
});

// ---------------------------------------------------------------- broken exporters (issue 11 §8)

/** parse a vLLM-style page through the real parser and mappings */
function vllmPage(v: { waiting?: string; running?: string; success?: string; count?: string; sum?: string }): Signals {
  const text = [
    '# TYPE vllm:num_requests_waiting gauge', `vllm:num_requests_waiting{model_name="m"} ${v.waiting ?? '0'}`,
    '# TYPE vllm:num_requests_running gauge', `vllm:num_requests_running{model_name="m"} ${v.running ?? '1'}`,
    '# TYPE vllm:request_success_total counter', `vllm:request_success_total{model_name="m"} ${v.success ?? '0'}`,
    '# TYPE vllm:e2e_request_latency_seconds histogram',
    `vllm:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} ${v.count ?? '0'}`,
    `vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} ${v.count ?? '0'}`,
    `vllm:e2e_request_latency_seconds_count{model_name="m"} ${v.count ?? '0'}`,
    `vllm:e2e_request_latency_seconds_sum{model_name="m"} ${v.sum ?? '0'}`,
  ].join('\n');
  return extractSignals(parseExposition(text + '\n'), resolveMappings('vllm'));
}

const recordOf = (st: ReturnType<InstanceEstimator['observe']>) =>
  buildInstanceRecord({ service: 'llm', addr: '10.0.0.1:80', peer: '', reason: 'ok', state: st, imputed: () => ({ es: NaN, es2: NaN }), baselineMs: NaN, lastOkAt: 0, now: 0, concurrency: undefined }).record;

function assertNoBadNumbers(r: ReturnType<typeof recordOf>): void {
  for (const k of ['rho', 'lambdaPerS', 'queueDepth', 'esMs', 'es2Ms2'] as const) {
    const v = r[k];
    assert.ok(Number.isNaN(v) || v >= 0, `${k} = ${v}`);
    assert.ok(v !== Infinity, `${k} = ${v}`);
  }
}

test('estimator: a counter that drops on every scrape marks the instance unhealthy (not ρ 8 / λ 654)', () => {
  const e = new InstanceEstimator({ windowMs: 10_000 });
  // true rate 20/s, but the exporter's counter falls back at every scrape
  let st = e.observe(0, vllmPage({ count: '1000', sum: '50' }));
  st = e.observe(1000, vllmPage({ count: '1020', sum: '51' }));
  assert.equal(st.invalid, undefined);
  close(st.lambdaPerS, 20);
  st = e.observe(2000, vllmPage({ count: '654', sum: '30' })); // one drop: a restart
  assert.equal(st.invalid, undefined, 'a single reset is a restart');
  st = e.observe(3000, vllmPage({ count: '500', sum: '20' })); // and again: not a counter
  assert.match(st.invalid ?? '', /counter went backwards 2 times within 10 s/);
  const r = recordOf(st);
  assert.equal(r.healthy, false);
  assert.equal(r.reason, 'parse_error');
  assertNoBadNumbers(r);
  st = e.observe(4000, vllmPage({ count: '400', sum: '10' }));
  assert.equal(recordOf(st).healthy, false);
  // a working counter again: healthy once the drops have left the window
  for (let t = 5000; t <= 12_000; t += 1000) st = e.observe(t, vllmPage({ count: String(400 + (t - 4000) / 50), sum: String(10 + (t - 4000) / 1000) }));
  assert.ok(st.invalid !== undefined, 'two drops (3 s, 4 s) still within the window');
  for (let t = 13_000; t <= 16_000; t += 1000) st = e.observe(t, vllmPage({ count: String(400 + (t - 4000) / 50), sum: String(10 + (t - 4000) / 1000) }));
  assert.equal(st.invalid, undefined);
  assert.equal(recordOf(st).healthy, true);
});

for (const [name, page, re] of [
  ['negative counter', { count: '-5', sum: '1' }, /Histogram count is -5/],
  ['negative success counter', { success: '-3' }, /completions is -3/],
  ['NaN gauge', { waiting: 'NaN' }, /waiting is NaN/],
  ['+Inf gauge', { running: '+Inf' }, /running is Infinity/],
  ['negative gauge', { waiting: '-2' }, /waiting is -2/],
] as const) {
  test(`estimator: ${name} -> scrape rejected, instance unhealthy with the reason, last good values kept`, () => {
    const e = new InstanceEstimator({ windowMs: 10_000 });
    e.observe(0, vllmPage({ count: '100', sum: '5' }));
    const good = e.observe(1000, vllmPage({ count: '120', sum: '6' }));
    const st = e.observe(2000, vllmPage(page));
    assert.match(st.invalid ?? '', re);
    const r = recordOf(st);
    assert.equal(r.healthy, false);
    assert.equal(r.reason, 'parse_error');
    assertNoBadNumbers(r);
    close(st.esMs, good.esMs);
    close(st.lambdaPerS, good.lambdaPerS);
    // the next good page is used again
    const next = e.observe(3000, vllmPage({ count: '140', sum: '7' }));
    assert.equal(next.invalid, undefined);
    assert.equal(recordOf(next).healthy, true);
  });
}

test('estimator: requests complete but the service-time sum stays 0 -> unhealthy, never E[S] 0', () => {
  const e = new InstanceEstimator({ windowMs: 10_000 });
  e.observe(0, vllmPage({ count: '100', sum: '0' }));
  const st = e.observe(1000, vllmPage({ count: '130', sum: '0' }));
  assert.match(st.invalid ?? '', /service-time sum did not grow while 30 requests completed/);
  const r = recordOf(st);
  assert.equal(r.healthy, false);
  assert.ok(!(r.esMs === 0), `esMs ${r.esMs}`);
});

// ---------------------------------------------------------------- no absorbing state (issue 9 §2)

test('estimator: an instance 10x slower for 30 s, then priced out (no request): E[S] returns to the prior within bounded time', () => {
  // 5 completions per 1 s scrape: 10 ms normally, 100 ms during the episode; after it the instance
  // receives nothing (the filter priced it out). Prior = the service's median (10 ms).
  const run = (prior?: () => { es: number; es2: number }): Array<[number, number]> => {
    const e = new InstanceEstimator({ windowMs: 10_000, concurrency: 4, prior });
    const b = [5, 20, 50, 200];
    const counts = [0, 0, 0, 0, 0];
    let sum = 0;
    const out: Array<[number, number]> = [];
    for (let t = 0; t <= 120_000; t += 1000) {
      if (t > 0 && t <= 30_000) { counts[0] += 0; counts[3] += 5; sum += 500; } // 100 ms each
      else if (t > 30_000 && t <= 60_000) { /* idle: priced out */ }
      out.push([t, e.observe(t, sig(hist(b, counts, sum))).esMs]);
    }
    return out;
  };
  const PRIOR = { es: 10, es2: 200 };
  const withPrior = run(() => PRIOR);
  const frozen = run(undefined);
  const at = (xs: Array<[number, number]>, t: number): number => xs.find(([x]) => x === t)![1];
  close(at(withPrior, 30_000), 100, 1e-9, 'during the episode: its own E[S]');
  close(at(frozen, 60_000), 100, 1e-9, 'control: without a prior the estimate stays at the episode value');
  // window (10 s) empties at 40 s; τ = 10 s: within 3τ after that it is within 5 % of the gap
  assert.ok(at(withPrior, 70_000) <= 10 + 0.06 * 90, `E[S] ${at(withPrior, 70_000)} at 70 s`);
  assert.ok(at(withPrior, 90_000) <= 11, `E[S] ${at(withPrior, 90_000)} at 90 s`);
  // monotone approach, never below the prior
  for (let t = 40_000; t < 120_000; t += 1000) assert.ok(at(withPrior, t + 1000) <= at(withPrior, t) + 1e-9 && at(withPrior, t) >= 10 - 1e-9);
});

test('estimator: a fresh instance in a busy window is not pulled toward the prior', () => {
  const e = new InstanceEstimator({ windowMs: 10_000, concurrency: 4, prior: () => ({ es: 10, es2: 200 }) });
  const b = [5, 20, 50, 200];
  const counts = [0, 0, 0, 0, 0];
  let sum = 0;
  let st = e.observe(0, sig(hist(b, counts, sum)));
  for (let t = 1000; t <= 30_000; t += 1000) {
    counts[2] += 10; // 40 ms each, 10/s: the window alone holds >= 50
    sum += 400;
    st = e.observe(t, sig(hist(b, counts, sum)));
  }
  close(st.esMs, 40);
});

test('estimator: baselineTrim reaches the per-instance baseline (mutation survivor)', () => {
  const b = new BaselineTracker(300_000, 0.5);
  for (const [t, v] of [[0, 1], [1, 2], [2, 3], [3, 100], [4, 200], [5, 300]] as const) b.add(t, v);
  assert.equal(b.value(5), 2); // top half dropped: median of 1, 2, 3
  const mk = (baselineTrim: number): number => {
    const e = new InstanceEstimator({ windowMs: 1_000, concurrency: 1, baselineTrim, minMomentCompletions: 1 });
    const bounds = [10, 1000, 100_000];
    const counts = [0, 0, 0, 0];
    let sum = 0;
    let st = e.observe(0, sig(hist(bounds, counts, sum)));
    // P99 samples: 5 fast windows then 5 very slow ones
    for (let k = 1; k <= 10; k++) {
      if (k <= 5) counts[0] += 10; else counts[2] += 10;
      sum += 10;
      st = e.observe(k * 1000, sig(hist(bounds, counts, sum)));
    }
    return st.baselineP99Ms;
  };
  assert.ok(mk(0.5) < mk(0), `trim 0.5: ${mk(0.5)}, trim 0: ${mk(0)}`);
});
