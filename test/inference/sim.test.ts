import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { parseExposition } from '../../agent/src/inference/exposition';
import { extractSignals, resolveMappings } from '../../agent/src/inference/mappings';
import { makeDistribution } from '../../sim/inference/distributions';
import { mulberry32 } from '../../sim/inference/prng';
import { FifoQueueModel, simulateFifo, VLLM_REQUEST_LATENCY_BUCKETS } from '../../sim/inference/queue';
import { startInferenceServer } from '../../sim/inference-server';

function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
  });
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await sleep(5);
  }
}

test('simulated vLLM server: c=1 with 3 concurrent slow requests -> running 1, waiting 2, served FIFO', async () => {
  const srv = await startInferenceServer({ kind: 'vllm', concurrency: 1, seed: 1 });
  try {
    const order: number[] = [];
    const reqs = [0, 1, 2].map(async (k) => {
      await sleep(k * 30); // arrival order 0, 1, 2
      const r = await get(`${srv.url}/v1/completions`, { 'x-sim-service-ms': '300' });
      order.push(k);
      return JSON.parse(r.body) as { id: number; queuedMs: number; serviceMs: number };
    });
    await until(() => srv.stats().arrived === 3);
    const m = await get(`${srv.url}/metrics`);
    assert.equal(m.status, 200);
    const s = extractSignals(parseExposition(m.body), resolveMappings('vllm'));
    assert.equal(s.running, 1);
    assert.equal(s.waiting, 2);
    assert.equal(s.kvCacheUsage, 1);
    const res = await Promise.all(reqs);
    assert.deepEqual(order, [0, 1, 2], 'completion order is arrival order');
    assert.deepEqual(res.map((r) => r.id), [1, 2, 3]);
    assert.ok(res[0].queuedMs < 20, `first waited ${res[0].queuedMs}`);
    assert.ok(res[1].queuedMs >= 240, `second waited ${res[1].queuedMs}`);
    assert.ok(res[2].queuedMs >= 500, `third waited ${res[2].queuedMs}`);
    const after = extractSignals(parseExposition((await get(`${srv.url}/metrics`)).body), resolveMappings('vllm'));
    assert.equal(after.running, 0);
    assert.equal(after.waiting, 0);
    assert.equal(after.completions, 3);
    assert.equal(after.latencyHist?.count, 3);
    assert.equal(after.serviceHist?.count, 3);
    // service ~300 ms each; e2e = 300 + 600 + 900
    assert.ok(Math.abs((after.serviceHist?.sumMs ?? 0) - 900) < 100, `service sum ${after.serviceHist?.sumMs}`);
    assert.ok(Math.abs((after.latencyHist?.sumMs ?? 0) - 1800) < 150, `e2e sum ${after.latencyHist?.sumMs}`);
  } finally {
    await srv.stop();
  }
});

test('simulated Triton server: c=2, pending count and cumulative durations reflect the queue', async () => {
  const srv = await startInferenceServer({ kind: 'triton', concurrency: 2, seed: 2 });
  try {
    const reqs = [0, 1, 2, 3].map(() => get(`${srv.url}/v2/models/sim/infer`, { 'x-sim-service-ms': '200' }));
    await until(() => srv.stats().arrived === 4);
    const s = extractSignals(parseExposition((await get(`${srv.url}/metrics`)).body), resolveMappings('triton'));
    assert.equal(s.waiting, 2);
    assert.equal(s.completions, 0);
    await Promise.all(reqs);
    const s2 = extractSignals(parseExposition((await get(`${srv.url}/metrics`)).body), resolveMappings('triton'));
    assert.equal(s2.waiting, 0);
    assert.equal(s2.completions, 4);
    // service = request duration - queue duration ≈ 4 x 200 ms
    assert.ok(Math.abs((s2.serviceSumMs ?? 0) - 800) < 80, `service sum ${s2.serviceSumMs}`);
    assert.ok((s2.gpuUtil ?? 0) > 0, 'GPU util (slot occupancy over the last second) > 0 right after work');
    assert.equal((await get(`${srv.url}/healthz`)).body, 'ok');
  } finally {
    await srv.stop();
  }
});

test('simulated TGI server and runtime speed change', async () => {
  const srv = await startInferenceServer({ kind: 'tgi', concurrency: 2, dist: { kind: 'fixed', meanMs: 40 }, seed: 3 });
  try {
    await get(`${srv.url}/generate`);
    srv.setSpeed(0.5); // twice as slow
    await get(`${srv.url}/generate`);
    const s = extractSignals(parseExposition((await get(`${srv.url}/metrics`)).body), resolveMappings('tgi'));
    assert.equal(s.completions, 2);
    assert.ok(Math.abs((s.serviceHist?.sumMs ?? 0) - 120) < 40, `service sum ${s.serviceHist?.sumMs}`);
  } finally {
    await srv.stop();
  }
});

test('queue model in virtual time: FIFO, c slots, utilisation, cancel', () => {
  // c = 2; arrivals 0,0,0,10 ; services 100, 50, 30, 10
  const { jobs, model } = simulateFifo({ concurrency: 2, arrivalsMs: [0, 0, 0, 10], serviceMs: [100, 50, 30, 10] });
  assert.deepEqual(jobs.map((j) => j.startedAt), [0, 0, 50, 80]);
  assert.deepEqual(jobs.map((j) => j.finishedAt), [100, 50, 80, 90]);
  assert.equal(model.completed, 4);
  assert.equal(model.e2e.count, 4);
  const q = new FifoQueueModel({ concurrency: 1, bucketsS: VLLM_REQUEST_LATENCY_BUCKETS });
  const a = q.arrive(0, 500);
  const b = q.arrive(0, 500);
  const c = q.arrive(0, 500);
  assert.deepEqual([q.running, q.waiting], [1, 2]);
  assert.deepEqual(q.waitingIds(), [b.id, c.id]);
  assert.ok(q.cancel(b));
  assert.equal(q.cancel(a), false, 'a running job cannot be cancelled');
  assert.deepEqual(q.complete(500, a).map((j) => j.id), [c.id]);
  q.complete(1000, c);
  assert.equal(q.utilization(1000, 1000), 1);
  assert.equal(q.utilization(1500, 1000), 0.5);
  const q2 = new FifoQueueModel({ concurrency: 2 });
  q2.complete(500, q2.arrive(0, 500));
  assert.equal(q2.utilization(1000, 1000), 0.25);
});

test('distributions: seeded, reproducible, sample moments match the analytic ones', () => {
  const specs = [
    { kind: 'exponential', meanMs: 80 },
    { kind: 'lognormal', meanMs: 80, sigma: 1 },
    { kind: 'pareto', meanMs: 80, alpha: 3.5 },
    { kind: 'bounded-pareto', alpha: 1.5, minMs: 10, maxMs: 1000 },
    { kind: 'fixed', meanMs: 80 },
  ] as const;
  for (const spec of specs) {
    const d = makeDistribution(spec);
    const r1 = mulberry32(7);
    const r2 = mulberry32(7);
    const xs = Array.from({ length: 200_000 }, () => d.sample(r1));
    assert.deepEqual(Array.from({ length: 5 }, () => d.sample(r2)), xs.slice(0, 5), 'same seed, same stream');
    const m1 = xs.reduce((a, b) => a + b, 0) / xs.length;
    const m2 = xs.reduce((a, b) => a + b * b, 0) / xs.length;
    assert.ok(Math.abs(m1 - d.mean) / d.mean < 0.02, `${spec.kind} mean ${m1} vs ${d.mean}`);
    assert.ok(Math.abs(m2 - d.secondMoment) / d.secondMoment < 0.1, `${spec.kind} E[S²] ${m2} vs ${d.secondMoment}`);
  }
  assert.notEqual(mulberry32(1)(), mulberry32(2)());
});
