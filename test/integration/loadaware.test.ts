// Load-aware instance choice end to end in the embedded host: snapshots with INSTANCES (encoded by
// the agent's codec) are served to the real filter; the test checks the header Envoy's ORIGINAL_DST
// cluster would route on, the skips, the link interplay, the all-ineligible policies and herding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { ProxyWasmHost, type RequestResult } from '../../host/src';
import { WASM, header } from './helpers';

const AUTH = 'inference.example';
const T0 = 1_000_000;

function inst(addr: string, over: Partial<InstanceRecord> = {}): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.3, esMs: 10, es2Ms2: 200, lambdaPerS: 10, queueDepth: 0,
    p50Ms: 10, p99Ms: 40, baselineP99Ms: 40, gpuUtil: 0.3, dataAgeMs: 0, slots: 1, ...over };
}

interface Bed {
  host: ProxyWasmHost;
  /** Serve this snapshot from now on (new seq) and let every VM adopt it. */
  serve(instances: InstanceRecord[], link?: 'normal' | 'degraded', rttMs?: number): Promise<void>;
  request(extra?: Record<string, string>, worker?: number): Promise<RequestResult>;
}

let seq = 1;
async function bed(loadAware: Record<string, unknown> = {}, workers = 1): Promise<Bed> {
  let body: Buffer = Buffer.alloc(0);
  const host = await ProxyWasmHost.create({
    wasm: WASM, workers, mainThread: false, canary: false, clock: 'manual', startTimeMs: T0,
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: 10 }, refreshMs: 10, leaseMs: 200,
      link: { stalenessMs: 60000, services: [] },
      // picker band 0: deterministic (always the cheapest), so the tests can name the instance
      loadAware: { services: [{ authorities: [AUTH], service: 'llm', picker: 'band', band: 0, stalenessMs: 60000, debug: true, ...loadAware }] },
    }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  return {
    host,
    serve: async (instances, link = 'normal', rttMs = 10) => {
      const now = T0;
      body = encodeSnapshot({ seq: ++seq, generatedAtMs: now,
        peers: [{ name: 'cloud-b', state: link, lastRttMs: rttMs, avgRttMs: rttMs, recoverStreak: 10, lastSampleAtMs: now }], instances });
      for (let i = 0; i < 8; i++) await host.advance(10);
    },
    request: (extra = {}, worker) => host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ...extra }, { worker }),
  };
}

const endpoint = (r: RequestResult) => header(r.upstreamHeaders, 'x-switchyard-endpoint');

test('chooses the lowest expected wait and overwrites a client-sent endpoint', async () => {
  const b = await bed();
  try {
    await b.serve([inst('10.0.0.1:80', { rho: 0.8, queueDepth: 3 }), inst('10.0.0.2:80', { rho: 0.2 }), inst('10.0.0.3:80', { rho: 0.5, queueDepth: 1 })]);
    const r = await b.request({ 'x-switchyard-endpoint': '169.254.169.254:80' });
    assert.deepEqual(endpoint(r), ['10.0.0.2:80']);
    assert.match(header(r.responseHeaders, 'x-switchyard-debug')[0], /^instance=10\.0\.0\.2:80 w_ms=10\.0 rho=0\.2\d* eligible=3 considered=1$/);
    // debug on: a client copy never reaches the upstream, an upstream copy is replaced by the filter's
    const d = await b.host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, 'x-switchyard-debug': 'client' },
      { response: { status: 200, headers: { 'x-switchyard-debug': 'upstream', 'x-switchyard-endpoint': '10.0.0.2:80' } } });
    assert.deepEqual(header(d.upstreamHeaders, 'x-switchyard-debug'), []);
    assert.equal(header(d.responseHeaders, 'x-switchyard-debug').length, 1);
    assert.match(header(d.responseHeaders, 'x-switchyard-debug')[0], /^instance=10\.0\.0\.2:80 /);
    assert.deepEqual(header(d.responseHeaders, 'x-switchyard-endpoint'), []);
  } finally {
    await b.host.close();
  }
});

test('skips saturated, unhealthy, slow and stale instances, and counts why', async () => {
  const b = await bed();
  try {
    await b.serve([
      inst('10.0.0.1:80', { rho: 0.96, queueDepth: 1 }),              // saturated: rho >= 0.95 and its one slot busy
      inst('10.0.0.2:80', { healthy: false, reason: 'unreachable' }), // unhealthy
      inst('10.0.0.3:80', { p99Ms: 700, baselineP99Ms: 100 }),        // score 0.43 < 0.5: out
      inst('10.0.0.4:80', { dataAgeMs: 70000 }),                      // older than stalenessMs
      inst('10.0.0.5:80', { rho: 0.9, queueDepth: 0 }),               // the only eligible one
    ]);
    for (let i = 0; i < 5; i++) assert.deepEqual(endpoint(await b.request()), ['10.0.0.5:80']);
    await b.host.advance(20); // counters reach the host on the tick
    assert.equal(b.host.metric('switchyard.lb.skip.saturated'), 5);
    assert.equal(b.host.metric('switchyard.lb.skip.unhealthy'), 5);
    assert.equal(b.host.metric('switchyard.lb.skip.slow'), 5);
    assert.equal(b.host.metric('switchyard.lb.skip.stale'), 5);
    assert.equal(b.host.metric('switchyard.lb.choice.llm.10_0_0_5_80'), 5);
  } finally {
    await b.host.close();
  }
});

test('de-weights a slow instance progressively instead of dropping it', async () => {
  const b = await bed();
  try {
    // same load; B's P99 is 4.5x its baseline: score 0.67, its cost counts 1/0.67 = 1.5x
    await b.serve([inst('10.0.0.1:80', { queueDepth: 4 }), inst('10.0.0.2:80', { p99Ms: 180, baselineP99Ms: 40 })]);
    const r = await b.request();
    // A: 10 + 4·10 = 50 ms; B: 10 / 0.667 = 15 ms: B still wins while it is much less loaded
    assert.deepEqual(endpoint(r), ['10.0.0.2:80']);
    await b.serve([inst('10.0.0.1:80', { queueDepth: 0 }), inst('10.0.0.2:80', { p99Ms: 180, baselineP99Ms: 40 })]);
    assert.deepEqual(endpoint(await b.request()), ['10.0.0.1:80']); // equal load: the healthy one
  } finally {
    await b.host.close();
  }
});

test('a degraded cross-cloud link excludes remote instances', async () => {
  const b = await bed();
  try {
    const fleet = [inst('10.0.0.1:80', { rho: 0.7, queueDepth: 2 }), inst('10.1.0.1:80', { peer: 'cloud-b', rho: 0.1 })];
    await b.serve(fleet, 'normal');
    assert.deepEqual(endpoint(await b.request()), ['10.1.0.1:80'], 'the idle remote instance wins while the line is fine');
    await b.serve(fleet, 'degraded');
    for (let i = 0; i < 5; i++) assert.deepEqual(endpoint(await b.request()), ['10.0.0.1:80']);
    await b.host.advance(20);
    assert.ok((b.host.metric('switchyard.lb.skip.link_degraded') ?? 0) >= 5);
  } finally {
    await b.host.close();
  }
});

test('a remote instance pays the measured link round trip', async () => {
  const b = await bed();
  try {
    // local: 10 + 3 queued × 10 = 40 ms; remote: 10 ms + RTT
    const fleet = [inst('10.0.0.1:80', { queueDepth: 3 }), inst('10.1.0.1:80', { peer: 'cloud-b' })];
    await b.serve(fleet, 'normal', 10);
    assert.deepEqual(endpoint(await b.request()), ['10.1.0.1:80'], '10 + 10 < 40');
    await b.serve(fleet, 'normal', 45); // inside the hysteresis band: still normal, but slow
    assert.deepEqual(endpoint(await b.request()), ['10.0.0.1:80'], '10 + 45 > 40');
  } finally {
    await b.host.close();
  }
});

test('all ineligible, forward-degraded: the default route with x-degraded: true, never a silent drop', async () => {
  const b = await bed({ allIneligible: 'forward-degraded' });
  try {
    await b.serve([inst('10.0.0.1:80', { rho: 0.99, queueDepth: 1 }), inst('10.0.0.2:80', { healthy: false })]);
    const r = await b.request({ 'x-switchyard-endpoint': '10.9.9.9:1', 'x-degraded': 'false' });
    assert.equal(r.localReply, undefined);
    assert.deepEqual(endpoint(r), [], 'no endpoint: ORIGINAL_DST is not used');
    assert.deepEqual(header(r.upstreamHeaders, 'x-degraded'), ['true']);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.lb.all_ineligible'), 1);
  } finally {
    await b.host.close();
  }
});

test('all ineligible, reject-503: a local 503 with retry-after', async () => {
  const b = await bed({ allIneligible: 'reject-503', retryAfterS: 2 });
  try {
    await b.serve([inst('10.0.0.1:80', { rho: 0.97, queueDepth: 2 })]);
    const r = await b.request();
    assert.equal(r.localReply?.status, 503);
    assert.equal(r.localReply?.details, 'switchyard_all_instances_ineligible');
    assert.deepEqual(header(r.localReply!.headers, 'retry-after'), ['2']);
    assert.equal(r.upstreamHeaders, undefined, 'nothing went upstream');
  } finally {
    await b.host.close();
  }
});

test('a client-sent x-degraded is stripped on load-aware and other authorities', async () => {
  const b = await bed();
  try {
    await b.serve([inst('10.0.0.1:80')]);
    const r = await b.request({ 'x-degraded': 'true' });
    assert.deepEqual(header(r.upstreamHeaders, 'x-degraded'), []);
    assert.deepEqual(endpoint(r), ['10.0.0.1:80']);
    const o = await b.host.request({ ':method': 'GET', ':path': '/', ':authority': 'other.example', 'x-degraded': 'true', 'x-switchyard-endpoint': '10.9.9.9:1' });
    assert.deepEqual(header(o.upstreamHeaders, 'x-degraded'), []);
    assert.deepEqual(header(o.upstreamHeaders, 'x-switchyard-endpoint'), []);
  } finally {
    await b.host.close();
  }
});

test('herding: our own in-flight requests count at once, across worker VMs', async () => {
  const b = await bed({}, 2);
  const release: (() => void)[] = [];
  const held = (worker: number) => b.host.request({ ':method': 'POST', ':path': '/', ':authority': AUTH },
    { worker, response: () => new Promise((resolve) => release.push(() => resolve({ status: 200 }))) });
  try {
    // A looks idle, B has 5.5 requests queued; both serve one request at a time at the same speed.
    await b.serve([inst('10.0.0.1:80', { queueDepth: 0 }), inst('10.0.0.2:80', { queueDepth: 5.5 })]);
    const w0: Promise<RequestResult>[] = [];
    for (let i = 0; i < 6; i++) w0.push(held(0));
    await new Promise((r) => setImmediate(r));
    // worker 1 learns worker 0's in-flight counts on the next tick: A now has 6 of ours > B's 5.5
    await b.host.advance(20);
    const r1 = held(1);
    await new Promise((r) => setImmediate(r));
    release.splice(0).forEach((f) => f());
    await new Promise((r) => setImmediate(r));
    await b.host.advance(1); // manual clock: upstream answers are delivered on the next advance
    const first = await Promise.all(w0);
    assert.deepEqual(first.map((r) => endpoint(r)[0]), Array(6).fill('10.0.0.1:80'), 'a burst fills A up to B\'s backlog, not past it');
    assert.deepEqual(endpoint(await r1), ['10.0.0.2:80'], 'worker 1 counts worker 0\'s in-flight requests');
    // the streams ended: A is free again for both workers
    await b.host.advance(20);
    assert.deepEqual(endpoint(await b.request({}, 1)), ['10.0.0.1:80']);
    assert.deepEqual(endpoint(await b.request({}, 0)), ['10.0.0.1:80']);
  } finally {
    release.forEach((f) => f());
    await b.host.close();
  }
});
