// Cross-VM in-flight counts through gauges (filter/assembly/lib/xvm.ts, loadAware.crossVm): the
// real filter in the embedded host with two worker VMs, whose metrics are shared process-wide by
// name as Envoy's stat store keeps them (test/host/timers-metrics.test.ts). Worker 0's requests in
// flight count in worker 1's next pick at once, before any tick exchanges the in-flight document.
// SY_WASM=<file> runs the same tests against another build (main's fails the first).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { ProxyWasmHost, type RequestResult } from '../../host/src';
import { WASM, header } from './helpers';

const AUTH = 'inference.example';
const T0 = 1_000_000;
const REFRESH_MS = 20;

function inst(addr: string, queueDepth: number): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.3, esMs: 10, es2Ms2: 200, lambdaPerS: 10, queueDepth,
    p50Ms: 10, p99Ms: 40, baselineP99Ms: 40, gpuUtil: 0.3, dataAgeMs: 0, slots: 1 };
}

/** In-band learning off: the picker's counts alone decide (the pile is measured in bench/robustness). */
async function twoWorkers(loadAware: Record<string, unknown> = {}) {
  const host = await ProxyWasmHost.create({
    wasm: process.env.SY_WASM ?? WASM, workers: 2, mainThread: true, canary: false, clock: 'manual', startTimeMs: T0,
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: REFRESH_MS }, refreshMs: REFRESH_MS, leaseMs: 20 * REFRESH_MS,
      link: { stalenessMs: 60000, services: [] },
      loadAware: { ...loadAware, services: [{ authorities: [AUTH], service: 'llm', stalenessMs: 60000, debug: true, inband: { enabled: false } }] },
    }),
    clusters: {
      switchyard_agent: {
        handler: () => ({ status: 200, body: encodeSnapshot({ seq: 1, generatedAtMs: T0, peers: [],
          instances: [inst('10.0.0.1:80', 0), inst('10.0.0.2:80', 5.5)] }) }),
      },
    },
  });
  for (let i = 0; i < 8; i++) await host.advance(REFRESH_MS);
  const release: (() => void)[] = [];
  const held = (worker: number) => host.request({ ':method': 'POST', ':path': '/', ':authority': AUTH },
    { worker, response: () => new Promise((resolve) => release.push(() => resolve({ status: 200 }))) });
  const once = (worker: number) => host.request({ ':method': 'POST', ':path': '/', ':authority': AUTH }, { worker });
  const gauges = () => host.metrics().filter((m) => /^switchyard\.xvm\.inflight\.\d+\.\d+$/.test(m.name));
  return { host, release, held, once, gauges };
}

const endpoint = (r: RequestResult) => header(r.upstreamHeaders, 'x-switchyard-endpoint');
const settle = () => new Promise((r) => setImmediate(r));

/**
 * Worker 0 holds 6 requests, then worker 1 sends one with no tick between (worker 0's in-flight
 * document still says nothing of them); all are released. Worker 0's results and worker 1's.
 */
async function burstThenPick(b: Awaited<ReturnType<typeof twoWorkers>>): Promise<{ w0: RequestResult[]; r1: RequestResult }> {
  const w0: Promise<RequestResult>[] = [];
  for (let i = 0; i < 6; i++) w0.push(b.held(0));
  await settle();
  const r1 = b.held(1);
  await settle();
  b.release.splice(0).forEach((f) => f());
  await settle();
  await b.host.advance(1);
  return { w0: await Promise.all(w0), r1: await r1 };
}

test('worker 0\'s requests in flight make worker 1 avoid their instance before any tick (gauges)', async () => {
  const b = await twoWorkers();
  try {
    // worker 0 has sent (a VM that sent within a second lists its gauges on its tick); A is idle, B has 5.5 queued
    assert.deepEqual(endpoint(await b.once(0)), ['10.0.0.1:80']);
    await b.host.advance(REFRESH_MS);
    const { w0, r1 } = await burstThenPick(b);
    assert.deepEqual(w0.map((r) => endpoint(r)[0]), Array(6).fill('10.0.0.1:80'));
    assert.deepEqual(endpoint(r1), ['10.0.0.2:80'], 'worker 1 reads worker 0\'s gauge for A: 6 in flight > B\'s 5.5');
  } finally {
    b.release.forEach((f) => f());
    await b.host.close();
  }
});

test('each worker\'s gauge holds its own count there, back to 0 when its requests end; the idle main-thread VM lists none', async () => {
  const b = await twoWorkers();
  try {
    await b.once(0);
    await b.once(1);
    await b.host.advance(REFRESH_MS);
    const w: Promise<RequestResult>[] = [b.held(0), b.held(0), b.held(1)];
    await settle();
    const g = b.gauges();
    // at most one gauge per worker and slot (named by the VM's token and its own slot: 2 x 2), each holding its worker's count
    assert.ok(g.length <= 4, g.map((m) => m.name).join(', '));
    assert.deepEqual(g.map((m) => m.value).filter((v) => v > 0).sort(), [1, 2]);
    b.release.splice(0).forEach((f) => f());
    await settle();
    await b.host.advance(1);
    await Promise.all(w);
    assert.deepEqual(b.gauges().filter((m) => m.value !== 0), []);
    const doc = b.host.sharedData()['switchyard.xvm.v1']?.value;
    assert.ok(doc, 'the gauge map is in shared data');
    // two workers' sections with 2 records each (14-byte header; u8 length, 11-byte address, u32 slot) and the main-thread VM's empty one
    assert.equal(doc.length, 3 * 14 + 4 * (1 + 11 + 4));
  } finally {
    b.release.forEach((f) => f());
    await b.host.close();
  }
});

test('loadAware.crossVm false: no gauges, the other worker\'s requests count from its next tick (the previous behaviour)', async () => {
  const b = await twoWorkers({ crossVm: false });
  try {
    await b.once(0);
    await b.host.advance(REFRESH_MS);
    const { r1 } = await burstThenPick(b);
    assert.deepEqual(endpoint(r1), ['10.0.0.1:80']);
    assert.equal(b.gauges().length, 0);
    assert.equal(b.host.sharedData()['switchyard.xvm.v1'], undefined);
  } finally {
    b.release.forEach((f) => f());
    await b.host.close();
  }
});

/** The distinct VM names in the cross-VM gauges' names (switchyard.xvm.inflight.<name>.<slot>). */
const gaugeNames = (b: Awaited<ReturnType<typeof twoWorkers>>) =>
  new Set(b.gauges().map((m) => m.name.split('.')[3]));

test('a worker VM reloaded 6 times (Envoy FAIL_RELOAD) reuses a gauge name: the names stay bounded by the VMs alive at once', async () => {
  const b = await twoWorkers();
  try {
    await b.once(1);
    for (let k = 0; k < 6; k++) {
      await b.once(0);
      await b.host.advance(REFRESH_MS);
      b.host.reloadWorker(0);
      // past the name's expiry (ten ticks, the writer lease at least: 400 ms here) before the next reload
      for (let t = 0; t < 25; t++) await b.host.advance(REFRESH_MS);
    }
    await b.once(0);
    // two ticks: the reloaded VM's tick runs at its own phase, after or before worker 1's
    await b.host.advance(REFRESH_MS);
    await b.host.advance(REFRESH_MS);
    // worker 1, worker 0 (one name at a time, reused), and at most one more while a reload overlaps the old name
    assert.ok(gaugeNames(b).size <= 3, [...gaugeNames(b)].join(', '));
    const names = b.host.sharedData()['switchyard.xvm.names.v1']?.value;
    assert.ok(names, 'the name pool is in shared data');
    assert.ok(names.length <= 4 * 12, `${names.length / 12} names in the pool`);
    // the reloaded worker's gauges still reach worker 1 before any tick
    const { w0, r1 } = await burstThenPick(b);
    assert.deepEqual(w0.map((r) => endpoint(r)[0]), Array(6).fill('10.0.0.1:80'));
    assert.deepEqual(endpoint(r1), ['10.0.0.2:80']);
  } finally {
    b.release.forEach((f) => f());
    await b.host.close();
  }
});
